"""Softcap calls on Hopper kernel variants: csrc/cuda/sm90.cu built with other FA_SM90_* defines (a
tile's key block, stages, consumers: tiles.h), beside the installed build's softcap and dense calls
on the same tensors and FlashAttention-3's softcap (bf16, when importable). Its first form timed
exponentials on the FMA pipe (bench/log/2026-12-06-eighth/ex2_fma.patch, bench/LOG.md 2026-12-06-eighth).

Each variant (NAME=DEFINE[,DEFINE...]; "base" has none) is compiled alone (tools/cabi.py, nvcc in
parallel) and called through fa_sm90_forward_variants. Every library is first checked against the tests' float64 reference
(tests/test_variants.py, by its rule) on awkward shapes, GQA, both dtypes, causal and not, with
ALiBi beside the softcap on two cases. Then bench.attention.time_interleaved on
FlashAttention's grid (B·N = 16k, H·d = 2048), ROUNDS rounds, medians, TFLOP/s over the visible
pairs. JSON lines, a table last.

    python3 -m tools.sm90.cap_tune [--variants base= bn176=FA_SM90_D128_BN=176,...] [--rounds 2]
                                   [--set var]                     (BUILD: where the libraries go)
    --set var: causal windows and bottom-right calls, no softcap, instead of the softcap points
    (FlashAttention-3's wheel has no windows: its column only for the others; our dense causal
    call over its own pairs)
    --build-only: build them and stop (beside another build); --prebuilt: keep those in BUILD
    --grids tile persistent: each library also with that grid forced (columns NAME/tile, NAME/persistent;
    fa_overrides.sm90_grid), beside its automatic choice
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tools.cabi import REPO, STRUCTS, family_library, fill_params  # noqa: E402

BUILD = os.environ.get("BUILD", "/tmp/sm90_cap_tune")
# The d = 128 tile (both the plain and the softcap kernels take it) on 176-key blocks; tiles.h wants
# all four of a tile's defines.
BN176 = "FA_SM90_D128_BN=176,FA_SM90_D128_STAGES=2,FA_SM90_D128_CONSUMERS=2,FA_SM90_D128_PINGPONG=1"
BF, HF = torch.bfloat16, torch.float16
try:
    from fa3_fwd_interface import flash_attn_func as fa3
except ImportError:
    fa3 = None

# (name, d, B, N, causal, softcap, dtype): FlashAttention's grid, H = 2048 / d.
POINTS = [("d128 cap30 4k", 128, 4, 4096, False, 30.0, BF), ("d128 cap30 causal 4k", 128, 4, 4096, True, 30.0, BF),
          ("d128 cap30 1k", 128, 16, 1024, False, 30.0, BF), ("d128 cap30 causal 16k", 128, 1, 16384, True, 30.0, BF),
          ("d64 cap30 4k", 64, 4, 4096, False, 30.0, BF), ("d64 cap30 causal 4k", 64, 4, 4096, True, 30.0, BF),
          ("d256 cap50 4k", 256, 4, 4096, False, 50.0, BF), ("d256 cap30 causal 4k", 256, 4, 4096, True, 30.0, BF),
          ("fp16 d128 cap30 4k", 128, 4, 4096, False, 30.0, HF)]
# --set var: causal variant calls without a softcap, (name, d, B, Nq, Nk, window_left, align, dtype);
# window_left −1: none; align 1: bottom-right. B·Nk = 16k, H = 2048 / d.
VAR_POINTS = [("d64 win256 4k", 64, 4, 4096, 4096, 256, 0, BF), ("d64 win1024 4k", 64, 4, 4096, 4096, 1024, 0, BF), ("d64 win4096 16k", 64, 1, 16384, 16384, 4096, 0, BF),
              ("d64 br 1k/4k", 64, 4, 1024, 4096, -1, 1, BF), ("d256 win1024 4k", 256, 4, 4096, 4096, 1024, 0, BF),
              ("d256 br 1k/4k", 256, 4, 1024, 4096, -1, 1, BF), ("d128 win1024 4k", 128, 4, 4096, 4096, 1024, 0, BF),
              ("fp16 d64 win1024 4k", 64, 4, 4096, 4096, 1024, 0, HF),
              ("d64 win1024 2k", 64, 8, 2048, 2048, 1024, 0, BF), ("d64 win512 2k", 64, 8, 2048, 2048, 512, 0, BF),
              ("d64 win1024 16k", 64, 1, 16384, 16384, 1024, 0, BF), ("d128 win512 2k", 128, 8, 2048, 2048, 512, 0, BF),
              ("d128 win4096 16k", 128, 1, 16384, 16384, 4096, 0, BF)]


def build(variants, prebuilt=False, load=True):
    """name -> the library (its path with load=False) for {name: [defines]}; prebuilt: those
    already in BUILD are kept."""
    os.makedirs(BUILD, exist_ok=True)
    procs = [(name, f"{BUILD}/{name}.so") for name in variants]
    running = [None if prebuilt and os.path.exists(so) else
               subprocess.Popen(family_library("sm90", so, variants[name]), cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for name, so in procs]
    libs = {}
    for (name, so), proc in zip(procs, running):
        if proc is None:
            libs[name] = ctypes.CDLL(so) if load else so
            continue
        log = proc.communicate()[0]
        if proc.returncode != 0:
            print(json.dumps({"build_failed": name, "log": log[-2000:]}), flush=True)
            continue
        spills = sorted({line.strip() for line in log.splitlines() if "spill stores" in line
                         and not line.strip().startswith("0 bytes stack frame, 0 bytes spill")})
        print(json.dumps({"built": name, "spills": spills[:6]}), flush=True)
        libs[name] = ctypes.CDLL(so) if load else so
    return libs


GRIDS = {"tile": 1, "persistent": 2, "counter": 4}     # fa_overrides.sm90_grid


def call(lib, q, k, v, o, causal, softcap, slopes=None, lse=None, window_left=-1, align=0, grid=0):
    """fa_sm90_forward_variants of a library: (B, H, N, d) tensors, a softcap (0: none; and ALiBi
    slopes, a window's left side, an alignment; lse: fp32 (B, H, N) filled too; grid: sm90_grid)."""
    p, va, ov = fill_params(q, k, v, o, causal, lse=lse), STRUCTS["fa_variants"](), STRUCTS["fa_overrides"]()
    ov.sm90_grid = grid
    va.softcap, va.align = softcap, align
    if window_left >= 0:
        va.window, va.window_left, va.window_right = 1, window_left, -1
    if slopes is not None:
        va.alibi_slopes = slopes.data_ptr()
    need = ctypes.c_size_t(0)
    st = lib.fa_sm90_variants_scratch_bytes(ctypes.byref(p), ctypes.byref(va), ctypes.byref(ov), ctypes.byref(need))
    assert st == 0, st
    scratch = torch.empty(need.value, dtype=torch.uint8, device="cuda") if need.value else None  # a tile counter
    st = lib.fa_sm90_forward_variants(ctypes.byref(p), ctypes.byref(va), ctypes.byref(ov),
                                      None if scratch is None else ctypes.c_void_p(scratch.data_ptr()),
                                      ctypes.c_size_t(need.value), ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    if st != 0:
        raise RuntimeError(f"fa_sm90_forward_variants returned {st}")


def check(libs):
    """Each library on each case against the tests' float64 reference (tests/test_variants.py), by
    their rule (FlashAttention's: error <= 2 x a same-dtype computation's + slack), the output
    poisoned with NaN first; lse too (2026-12-07: a variant whose output passed here failed the
    suite's lse checks). name -> "ok" or the first failure."""
    cases = [(2, 4, 2, 300, 517, 64, False, 30.0, BF, False), (2, 4, 2, 517, 300, 128, True, 30.0, BF, False),
             (1, 2, 1, 1000, 1000, 256, True, 50.0, BF, False), (3, 2, 2, 1, 700, 128, False, 5.0, HF, False),
             (1, 8, 8, 777, 1025, 128, False, 30.0, HF, False), (2, 4, 4, 640, 640, 64, True, 30.0, HF, True),
             (1, 4, 2, 2049, 2049, 128, True, 2.0, BF, True), (1, 2, 2, 129, 4000, 256, False, 30.0, HF, False)]
    cases = [c + (-1, 0) for c in cases]               # no window, top-left
    # causal windows and bottom-right calls, no softcap: ..., window_left, align (1: bottom-right)
    cases += [(1, 4, 2, 2049, 2049, 64, True, 0.0, BF, False, 300, 0), (2, 2, 1, 1500, 1500, 256, True, 0.0, HF, False, 700, 0),
              (1, 4, 4, 1100, 1100, 128, True, 0.0, BF, False, 200, 0), (2, 4, 2, 700, 2500, 64, True, 0.0, BF, False, -1, 1),
              (1, 2, 2, 1000, 3001, 256, True, 0.0, HF, False, 513, 1), (1, 4, 2, 3000, 1500, 64, True, 0.0, BF, False, -1, 1)]
    g = torch.Generator(device="cuda").manual_seed(1)
    result = {k: "ok" for k in libs}
    for case in cases:
        B, Hq, Hkv, Nq, Nk, d, causal, cap, dt, alibi, left, align = case
        q = (3 * torch.randn(B, Hq, Nq, d, device="cuda", generator=g)).to(dt)
        k, v = (torch.randn(B, Hkv, Nk, d, device="cuda", generator=g).to(dt) for _ in range(2))
        slopes = torch.rand(Hq, device="cuda", generator=g) * 0.5 if alibi else None
        kw = dict(causal=causal, softcap=cap or None, alibi_slopes=slopes, window=(left, -1),
                  causal_align=("top_left", "bottom_right")[align])
        judge(libs, result, q, k, v, kw, f"{case}",
              lambda lib, o, lse: call(lib, q, k, v, o, causal, cap, slopes, lse, left, align))
    return result


def judge(libs, result, q, k, v, kw, what, run):
    """One case: run(lib, o, lse) fills each library's output and lse (poisoned with NaN first),
    judged against the tests' float64 reference with the variants kw, by their rule (output and
    lse); a library's first failure (or error) goes into result[name]."""
    sys.path.insert(0, str(REPO / "tests"))
    from test_variants import assert_lse, assert_rule, exact, pytorch_like
    (ref, ref_lse), (pt, pt_lse) = exact(q, k, v, **kw), pytorch_like(q, k, v, **kw)
    for name, lib in libs.items():
        o = torch.full_like(q, float("nan"))
        lse = torch.full(q.shape[:3], float("nan"), device="cuda")
        try:
            run(lib, o, lse)
            torch.cuda.synchronize()
            assert_rule(o, ref, pt, q.dtype, what)
            assert_lse(lse, ref_lse, pt_lse, what)
        except (AssertionError, RuntimeError) as e:
            if result[name] == "ok":
                result[name] = f"FAIL {e}"


def time_point(calls, row, bhd, N, causal, r, name, pairs=None):
    """calls ({column: fn}) timed call by call in turn (bench.attention.time_interleaved); each
    column's TFLOP/s over the visible pairs (N·N, causal N·(N+1)/2, or given: a number, or
    {column: number} for the columns that differ) appended to row[column]; a JSON line."""
    from bench.attention import time_interleaved
    names = list(calls)
    ms = time_interleaved([calls[c] for c in names], 0.3)
    own = pairs if isinstance(pairs, dict) else {}
    pairs = pairs if isinstance(pairs, int) else (N * (N + 1) // 2 if causal else N * N)
    for c, t in zip(names, ms):
        row.setdefault(c, []).append(4 * bhd * own.get(c, pairs) / t / 1e9)
    print(json.dumps({"round": r, "point": name, **{c: round(row[c][-1], 1) for c in names}}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", nargs="+", default=["base=", "bn176=" + BN176],
                    help="NAME=DEFINE[,DEFINE...] each")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--set", choices=["cap", "var"], default="cap",
                    help="cap: the softcap points; var: causal windows and bottom-right calls")
    ap.add_argument("--build-only", action="store_true", help="build the libraries into $BUILD and stop")
    ap.add_argument("--prebuilt", action="store_true", help="keep the libraries already in $BUILD")
    ap.add_argument("--grids", nargs="*", default=[], choices=list(GRIDS),
                    help="each library also with this grid forced")
    args = ap.parse_args()
    variants = {v.split("=", 1)[0]: [d for d in v.split("=", 1)[1].split(",") if d] for v in args.variants}
    if args.build_only:
        build(variants, load=False)
        return
    import torch_flashattn                            # after --build-only: the build may be under way
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "fa3": fa3 is not None, "variants": variants}), flush=True)
    libs = build(variants, args.prebuilt)
    # (column, library, sm90_grid): each library on its automatic grid, then on each forced one (NAME/GRID)
    runs = [(f"{n}/{gr}" if gr else n, lib, GRIDS.get(gr, 0)) for n, lib in libs.items() for gr in [None] + args.grids]
    for name, res in check(libs).items():
        print(json.dumps({"check": name, "result": res}), flush=True)
    tflops = {}
    for r in range(args.rounds):
        for name, d, B, N, causal, cap, dt in POINTS if args.set == "cap" else []:
            H = 2048 // d
            g = torch.Generator(device="cuda").manual_seed(0)
            q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=dt, generator=g) for _ in range(3))
            o = torch.empty_like(q)
            calls = {c: (lambda lib=lib, gr=gr: call(lib, q, k, v, o, causal, cap, grid=gr)) for c, lib, gr in runs}
            calls["fa"] = lambda: torch_flashattn.attention(q, k, v, causal=causal, softcap=cap)
            calls["dense"] = lambda: torch_flashattn.attention(q, k, v, causal=causal)
            if fa3 is not None and dt == BF:
                qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
                calls["fa3"] = lambda: fa3(qt, kt, vt, causal=causal, softcap=cap)
            time_point(calls, tflops.setdefault(name, {}), B * H * d, N, causal, r, name)
        for name, d, B, Nq, Nk, left, align, dt in VAR_POINTS if args.set == "var" else []:
            H = 2048 // d
            g = torch.Generator(device="cuda").manual_seed(0)
            q = torch.randn(B, H, Nq, d, device="cuda", dtype=dt, generator=g)
            k, v = (torch.randn(B, H, Nk, d, device="cuda", dtype=dt, generator=g) for _ in range(2))
            o = torch.empty_like(q)
            kw = dict(window=(left, -1), causal_align=("top_left", "bottom_right")[align])
            calls = {c: (lambda lib=lib, gr=gr: call(lib, q, k, v, o, True, 0.0, None, None, left, align, gr))
                     for c, lib, gr in runs}
            calls["fa"] = lambda: torch_flashattn.attention(q, k, v, causal=True, **kw)
            if align == 0 and Nq == Nk:
                calls["dense"] = lambda: torch_flashattn.attention(q, k, v, causal=True)
            if fa3 is not None and dt == BF and left < 0:   # bottom-right, as FA3's causal; its wheel has no windows
                qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
                calls["fa3"] = lambda: fa3(qt, kt, vt, causal=True, window_size=(left, 0))
            last = torch.arange(Nq) + (Nk - Nq) * align             # each row's last visible key
            first = (last - left).clamp(min=0) if left >= 0 else torch.zeros_like(last)
            pairs = int((last.clamp(max=Nk - 1) - first + 1).clamp(min=0).sum())
            # the dense causal call over its own pairs: "/ dense" compares TFLOP/s on visible pairs
            time_point(calls, tflops.setdefault(name, {}), B * H * d, Nq, True, r, name,
                       {c: Nq * (Nq + 1) // 2 if c == "dense" else pairs for c in calls})
    mine = [c for c, _, _ in runs]
    cols, first = mine + ["fa", "dense", "fa3"], next(iter(libs))
    w = max(8, *(len(c) + 1 for c in cols))
    print(f"{'point':24s}" + "".join(f"{c:>{w}s}" for c in cols) + f"   best: / {first}, / fa3, / dense")
    for name, row in tflops.items():
        med = {c: statistics.median(x) for c, x in row.items()}
        best = max(mine, key=med.get)
        fa3r = f"{med[best] / med['fa3']:.3f}" if "fa3" in med else "-"
        dense = f"{med[best] / med['dense']:.3f}" if "dense" in med else "-"
        print(f"{name:24s}" + "".join(f"{med[c]:{w}.1f}" if c in med else f"{'-':>{w}s}" for c in cols)
              + f"   {best} {med[best] / med[first]:.3f} {fa3r} {dense}")


if __name__ == "__main__":
    main()
