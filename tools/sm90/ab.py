"""Plain (dense) calls on Hopper kernel builds side by side: csrc/cuda/sm90.cu built with other
FA_SM90_* defines (tiles.h), each called through fa_sm90_forward (and fa_sm90_forward_variants for
ALiBi or sinks alone, which run the plain tiles' own instantiations), beside FlashAttention-3
(bf16, when importable) and the production op. It needs the package built (the tests' reference
imports it): not beside the build, unlike --build-only.

Each build (NAME=DEFINE[,DEFINE...]; "base=" has none) is first checked against the tests' float64
reference (tests/test_variants.py, by their rule, output and lse) on awkward shapes: GQA, tails,
top-left causal with Nq != Nk, both dtypes, d = 64/128/256, every grid (one CTA per tile,
persistent, pairs; with --scratch the counter walk too), ALiBi and sinks. Then bench.attention.time_interleaved on FlashAttention's grid
(B·N = 16k, H·d = 2048), ROUNDS rounds, medians, TFLOP/s over the visible pairs. JSON lines, a
table last.

    python3 -m tools.sm90.ab --variants base= skip2=FA_SM90_CAUSAL_SKIP=2 [--points d64c4k ...] [--rounds 2]
    --build-only: build the libraries into $BUILD and stop; --prebuilt: keep those in $BUILD
A point is d<d>[c]<N>[h]: c causal, h fp16 (bf16 otherwise), N as 2k / 512.
"""
import argparse
import ctypes
import json
import os
import re
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tools.cabi import STRUCTS, fill_params  # noqa: E402
from tools.sm90.cap_tune import build, judge, time_point  # noqa: E402
import tools.sm90.cap_tune as cap_tune  # noqa: E402

BF, HF = torch.bfloat16, torch.float16
try:
    from fa3_fwd_interface import flash_attn_func as fa3
except ImportError:
    fa3 = None
SCRATCH = None      # --scratch: a zeroed buffer passed to every call (the packed walk's counter, 4 bytes)
POINTS = ["d64c2k", "d64c4k", "d64c8k", "d64c16k", "d256c2k", "d256c4k", "d256c8k", "d128c4k", "d64c4kh"]


def point(s):
    m = re.fullmatch(r"d(\d+)(c?)(\d+)(k?)(h?)", s)
    if not m:
        raise ValueError(f"point {s!r}: expected d<d>[c]<N>[k][h]")
    return int(m[1]), bool(m[2]), int(m[3]) * (1024 if m[4] else 1), HF if m[5] else BF


def call(lib, q, k, v, o, causal, lse=None, slopes=None, sinks=None, grid=0):
    """One library's plain call on (B, H, N, d) tensors; with ALiBi slopes or sinks through
    fa_sm90_forward_variants. grid: fa_overrides.sm90_grid (0 automatic)."""
    p, ov = fill_params(q, k, v, o, causal, lse=lse), STRUCTS["fa_overrides"]()
    ov.sm90_grid = grid
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    scratch = None if SCRATCH is None else ctypes.c_void_p(SCRATCH.data_ptr())
    size = ctypes.c_size_t(0 if SCRATCH is None else SCRATCH.numel())
    if slopes is None and sinks is None:
        st = lib.fa_sm90_forward(ctypes.byref(p), ctypes.byref(ov), scratch, size, stream)
    else:
        va = STRUCTS["fa_variants"]()
        va.alibi_slopes = None if slopes is None else slopes.data_ptr()
        va.sinks = None if sinks is None else sinks.data_ptr()
        st = lib.fa_sm90_forward_variants(ctypes.byref(p), ctypes.byref(va), ctypes.byref(ov), scratch, size,
                                          stream)
    if st != 0:
        raise RuntimeError(f"fa_sm90_forward returned {st}")


def check(libs):
    """name -> "ok" or the first failure; outputs and lse poisoned with NaN first."""
    # (B, Hq, Hkv, Nq, Nk, d, causal, dtype, extra, grid): extra "alibi" / "sinks" / None.
    cases = [(1, 4, 2, 2049, 2049, 64, True, BF, None, 0), (2, 3, 1, 1500, 3000, 64, True, HF, None, 0),
             (1, 2, 2, 3000, 1500, 64, True, BF, None, 0), (4, 8, 8, 1100, 1100, 64, True, BF, None, 1),
             (4, 8, 8, 1100, 1100, 64, True, HF, None, 2), (2, 4, 4, 1234, 1234, 256, True, BF, None, 0),
             (1, 6, 2, 700, 2000, 256, True, HF, None, 2), (3, 8, 4, 2049, 2049, 128, True, BF, None, 3),
             (2, 4, 2, 300, 517, 64, False, BF, None, 0), (1, 4, 4, 1500, 1500, 64, True, BF, "alibi", 0),
             (1, 4, 2, 1500, 1500, 64, True, HF, "sinks", 0), (1, 4, 4, 900, 900, 256, True, BF, "sinks", 1),
             (1, 2, 1, 4500, 4500, 128, True, HF, None, 0), (2, 4, 2, 1100, 1300, 128, True, BF, None, 4)]
    g = torch.Generator(device="cuda").manual_seed(2)
    result = {k: "ok" for k in libs}
    for B, Hq, Hkv, Nq, Nk, d, causal, dt, extra, grid in cases:
        q = (2 * torch.randn(B, Hq, Nq, d, device="cuda", generator=g)).to(dt)
        k, v = (torch.randn(B, Hkv, Nk, d, device="cuda", generator=g).to(dt) for _ in range(2))
        slopes = torch.rand(Hq, device="cuda", generator=g) * 0.5 if extra == "alibi" else None
        sinks = torch.randn(Hq, device="cuda", generator=g) if extra == "sinks" else None
        judge(libs, result, q, k, v, dict(causal=causal, alibi_slopes=slopes, sinks=sinks),
              f"{(B, Hq, Hkv, Nq, Nk, d, causal, str(dt), extra, grid)}",
              lambda lib, o, lse: call(lib, q, k, v, o, causal, lse, slopes, sinks, grid))
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", nargs="+", default=["base=", "skip2=FA_SM90_CAUSAL_SKIP=2"],
                    help="NAME=DEFINE[,DEFINE...] each")
    ap.add_argument("--points", nargs="+", default=POINTS)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--build-only", action="store_true", help="build the libraries into $BUILD and stop")
    ap.add_argument("--prebuilt", action="store_true", help="keep the libraries already in $BUILD")
    ap.add_argument("--scratch", type=int, default=0,
                    help="bytes of scratch for every call (4: the counter of the long causal d = 128 walk)")
    args = ap.parse_args()
    cap_tune.BUILD = os.environ.get("BUILD", "/tmp/sm90_ab")
    variants = {v.split("=", 1)[0]: [d for d in v.split("=", 1)[1].split(",") if d] for v in args.variants}
    if args.build_only:
        build(variants, load=False)
        return
    import torch_flashattn                            # after --build-only: the build may be under way
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "fa3": fa3 is not None, "variants": variants}),
          flush=True)
    global SCRATCH
    if args.scratch > 0:
        SCRATCH = torch.zeros(args.scratch, dtype=torch.uint8, device="cuda")
    libs = build(variants, args.prebuilt)
    checks = check(libs)
    for name, res in checks.items():
        print(json.dumps({"check": name, "result": res}), flush=True)
    libs = {k: lib for k, lib in libs.items() if checks[k] == "ok"}
    tflops = {}
    for r in range(args.rounds):
        for pt in args.points:
            d, causal, N, dt = point(pt)
            B, H = max(1, 16384 // N), 2048 // d
            g = torch.Generator(device="cuda").manual_seed(0)
            q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=dt, generator=g) for _ in range(3))
            o = torch.empty_like(q)
            calls = {name: (lambda lib=lib: call(lib, q, k, v, o, causal)) for name, lib in libs.items()}
            calls["fa"] = lambda: torch_flashattn.attention(q, k, v, causal=causal)
            if fa3 is not None and dt == BF:
                qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
                calls["fa3"] = lambda: fa3(qt, kt, vt, causal=causal)
            time_point(calls, tflops.setdefault(pt, {}), B * H * d, N, causal, r, pt)
    cols = list(libs) + ["fa", "fa3"]
    first = next(iter(libs), None)
    print(f"{'point':10s}" + "".join(f"{c:>8s}" for c in cols) + "   each / first; first / fa3")
    for pt, row in tflops.items():
        med = {c: statistics.median(x) for c, x in row.items()}
        ratios = " ".join(f"{med[c] / med[first]:.3f}" for c in libs)
        fa3r = f"{med[first] / med['fa3']:.3f}" if "fa3" in med else "-"
        print(f"{pt:10s}" + "".join(f"{med[c]:8.1f}" if c in med else f"{'-':>8s}" for c in cols)
              + f"   {ratios}; {fa3r}")


if __name__ == "__main__":
    main()
