"""Builds, checks and times tile variants of the Hopper kernel (csrc/cuda/sm90.cu) in one GPU run.

Each variant is csrc/cuda/sm90.cu compiled alone into a shared library (tools/cabi.py) with other
FA_SM90_D<d>_{BN,STAGES,CONSUMERS,PINGPONG} values (nvcc runs in parallel), loaded with ctypes and
called through fa_sm90_forward with an fa_params read from csrc/fa.h. Every variant is checked
against SDPA math on float64 over awkward shapes before it is timed next to the production kernel
(torch.ops.fa.forward under overrides(family="sm90"): its automatic grid, "auto"; one CTA per tile,
"tile" (sm90_grid="tile"); one CTA per SM walking the tiles, "persistent", or causal tiles in pairs,
"pairs"; the last round not split along the keys, "tail0" (sm90_tail=1), as the variants run,
having no scratch; d = 128 non-causal on the 2-consumer tile at every length, "long_off", or on the
3-consumer 80-key tile, "long_on" (sm90_long_tile)) and SDPA's cudnn backend, on FlashAttention's grid (bf16, B·N = 16k, H·d = 2048),
with triton.testing.do_bench. With --rounds R every column is timed R times, each round in an order
rotated by one, and the medians are printed: single readings of two columns that run the same grid
have come out 4-9 % apart on a power-capped card (bench/LOG.md, 2026-12-05).
On the H200, after the build:

    python3 -m tools.sm90.tune [--d 128] [--n 1k 4k 16k] [--no-variants]

TUNE_VARIANTS="d,BN,STAGES,CONSUMERS,PINGPONG[,NAME=x...];..." replaces the variants, TUNE_PROD="auto,tail0"
picks the production columns, BUILD (default /tmp/sm90_tune) holds the libraries, TUNE_PREBUILT=1 reuses
them (built elsewhere with --build-only from the same sources).
"""
import argparse
import ctypes
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

# (d, BN, STAGES, CONSUMERS, PINGPONG, other FA_SM90_* defines); the production tiles are timed
# through the op. LAZY: the lazy running max (sm90_softmax); LONG_NK: the three-consumer d = 128
# tile from that many keys on, non-causal (1 << 40: never); SOFTMAX_FENCE: 1 / 0 softmax_done on every tile / none;
# RESCALE_SKIP: 0 rescales O even when no row's max moved, 1 skips it per warp, 2 per group of 8 rows.
VARIANTS = [
    (64, 128, 2, 3, 1, {"RESCALE_SKIP": 0}),
    (128, 128, 2, 2, 1, {"RESCALE_SKIP": 0}), (128, 128, 2, 2, 1, {"SOFTMAX_FENCE": 1}),
    (128, 128, 2, 2, 1, {"LONG_NK": 1 << 40}),
    (256, 80, 2, 2, 1, {"RESCALE_SKIP": 0}),
]
if os.environ.get("TUNE_VARIANTS"):      # e.g. "128,176,2,2,1,LAZY=8;64,128,2,3,1"
    VARIANTS = [tuple(int(x) for x in v.split(",")[:5]) + (dict((kv.split("=")[0], int(kv.split("=")[1]))
                for kv in v.split(",")[5:]),) for v in os.environ["TUNE_VARIANTS"].split(";")]


def vname(v):
    short = {"LAZY": "L", "LONG_NK": "K", "SOFTMAX_FENCE": "F", "RESCALE_SKIP": "R", "RESCALE_EARLY": "E"}
    return f"bn{v[1]}s{v[2]}c{v[3]}p{v[4]}" + "".join(f"{short.get(k, k)}{x}" for k, x in v[5].items())
# The production kernel's columns: the overrides each runs under (torch_flashattn._testing).
PROD = {"auto": {}, "tile": {"sm90_grid": "tile"}, "persistent": {"sm90_grid": "persistent"},
        "pairs": {"sm90_grid": "pairs"}, "tail0": {"sm90_tail": 1},
        "long_off": {"sm90_long_tile": "off"}, "long_on": {"sm90_long_tile": "on"}}
# Timed by default: the first five; TUNE_PROD="auto,long_off,long_on" picks others.
PROD, _ALL = {k: PROD[k] for k in list(PROD)[:5]}, PROD
if os.environ.get("TUNE_PROD"):          # e.g. "auto": only those columns of the production kernel
    PROD = {k: _ALL[k] for k in os.environ["TUNE_PROD"].split(",")}
BUILD = os.environ.get("BUILD", "/tmp/sm90_tune")


def build(variants, load=True):
    os.makedirs(BUILD, exist_ok=True)
    procs = []
    for v in variants:
        d, bn, st, cons, pp, extra = v
        so = f"{BUILD}/d{d}_{vname(v)}.so"
        if os.environ.get("TUNE_PREBUILT") and os.path.exists(so):    # built elsewhere (same sources)
            procs.append((so, None))
            continue
        cmd = family_library("sm90", so, [f"FA_SM90_D{d}_BN={bn}", f"FA_SM90_D{d}_STAGES={st}",
                                          f"FA_SM90_D{d}_CONSUMERS={cons}", f"FA_SM90_D{d}_PINGPONG={pp}"]
                             + [f"FA_SM90_{k}={x}" for k, x in extra.items()])
        procs.append((so, subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                           text=True)))
    libs = []
    for so, proc in procs:
        if proc is None:
            libs.append(ctypes.CDLL(so) if load else so)
            continue
        log = proc.communicate()[0]
        if proc.returncode != 0:
            print(f"build failed: {so}\n{log[-3000:]}")
            libs.append(None)
            continue
        spills = [line.strip() for line in log.splitlines() if "spill" in line and not line.strip().startswith("0 bytes stack frame, 0 bytes spill")]
        if spills:
            print(f"{os.path.basename(so)}: {spills[:2]}")
        libs.append(ctypes.CDLL(so) if load else so)
    return libs


def call(lib, q, k, v, o, causal, scale=None, grid=0):
    """fa_sm90_forward of a variant library: automatic overrides but for the grid (fa_overrides'
    sm90_grid: 0 automatic, 1 one CTA per tile, 2 persistent), no scratch (no split last round)."""
    p, overrides = fill_params(q, k, v, o, causal, scale), STRUCTS["fa_overrides"]()
    overrides.sm90_grid = grid
    status = lib.fa_sm90_forward(ctypes.byref(p), ctypes.byref(overrides), None, ctypes.c_size_t(0),
                                 ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    if status != 0:
        raise RuntimeError(f"fa_sm90_forward returned {status}")


def check(lib, d):
    """Our error <= 2 × SDPA's bf16 error + 1e-5 on awkward shapes; outputs poisoned first."""
    # The last three have more query tiles than the H200 has SMs: persistent CTAs take several.
    # Variants run with the production grid rule (csrc/cuda/sm90.cu, sm90_persistent).
    for B, Hq, Hkv, Nq, Nk, causal in [(2, 4, 2, 300, 517, False), (2, 4, 2, 517, 300, True), (1, 2, 1, 1000, 1000, True),
                                       (3, 2, 2, 1, 700, False), (1, 1, 1, 129, 33, True),
                                       (4, 16, 4, 1000, 1000, True), (8, 8, 8, 777, 1025, False),
                                       (3, 32, 8, 2049, 2049, True)]:
        q = torch.randn(B, Hq, Nq, d, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(B, Hkv, Nk, d, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(B, Hkv, Nk, d, dtype=torch.bfloat16, device="cuda")
        o = torch.full_like(q, float("nan"))
        try:
            call(lib, q, k, v, o, causal)
        except RuntimeError as e:
            return str(e)
        with sdpa_kernel(SDPBackend.MATH):
            ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal, enable_gqa=True)
            pt = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        err, err_pt = (o.double() - ref).abs().max().item(), (pt.double() - ref).abs().max().item()
        if not err <= 2 * err_pt + 1e-5:
            return f"FAIL B={B} H={Hq}/{Hkv} Nq={Nq} Nk={Nk} causal={causal}: {err:.2e} vs {err_pt:.2e}"
    return "ok"


def rotated(items, r):
    """items in an order rotated by r: round r of --rounds starts with the r-th column."""
    items = list(items)
    r %= max(len(items), 1)
    return items[r:] + items[:r]


def main():
    ap = argparse.ArgumentParser(prog="python3 -m tools.sm90.tune", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--d", nargs="+", type=int, default=[64, 128, 256])
    ap.add_argument("--n", nargs="+", default=["1k", "2k", "4k", "16k"])
    ap.add_argument("--no-variants", action="store_true", help="time the production kernel only")
    ap.add_argument("--build-only", action="store_true", help="build the variants into $BUILD and stop")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time every column this many times, each round in an order rotated by one; print medians")
    args = ap.parse_args()
    ns = [int(x[:-1]) * 1024 if x.endswith("k") else int(x) for x in args.n]
    variants = [] if args.no_variants else [v for v in VARIANTS if v[0] in args.d]
    if args.build_only:
        for so in build(variants, load=False):
            print(so)
        return
    import torch_flashattn  # noqa: F401  (torch.ops.fa; imported here: trace.py uses call() without it)
    from torch_flashattn._testing import overrides
    from triton.testing import do_bench
    libs = build(variants)
    for d in args.d:
        mine = [(v, lib) for v, lib in zip(variants, libs) if v[0] == d and lib is not None]
        status = [check(lib, d) for v, lib in mine]
        names = list(PROD) + ["cudnn"] + [vname(v) for v, _ in mine]
        print(f"\nd={d} TFLOP/s (bf16, B·N=16k, H·d=2048); checks: " +
              ", ".join(f"{vname(v)} {st}" for (v, _), st in zip(mine, status)))
        print("causal N      " + " ".join(f"{n:>17}" for n in names))
        logs = {n: [] for n in names}
        for causal in (False, True):
            for N in ns:
                B, H = 16384 // N, 2048 // d
                q, k, v = (torch.randn(B, H, N, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
                o = torch.empty_like(q)
                flops = 4 * B * H * N * N * d / (2 if causal else 1)

                def time_column(j, name):
                    if name == "cudnn":
                        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                            return do_bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                            warmup=25, rep=100)
                    if name in PROD:
                        with overrides(family="sm90", **PROD[name]):
                            return do_bench(lambda: torch.ops.fa.forward(q, k, v, None, causal), warmup=25, rep=100)
                    if status[j - len(PROD) - 1] != "ok":
                        return float("nan")
                    lib = mine[j - len(PROD) - 1][1]
                    return do_bench(lambda: call(lib, q, k, v, o, causal), warmup=25, rep=100)

                times = {j: [] for j in range(len(names))}
                for r in range(args.rounds):
                    for j in rotated(range(len(names)), r):
                        times[j].append(time_column(j, names[j]))
                row = []
                for j, name in enumerate(names):
                    tf = flops / statistics.median(times[j]) / 1e9
                    row.append(tf)
                    if tf == tf:
                        logs[name].append(math.log(tf))
                print(f"{int(causal):6} {N:5}  " + " ".join(f"{x:17.0f}" for x in row), flush=True)
        print("geomean       " + " ".join(f"{math.exp(sum(l) / len(l)) if l else float('nan'):17.0f}" for l in logs.values()))


if __name__ == "__main__":
    main()
