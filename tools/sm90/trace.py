"""Where a Hopper tile's time goes: clock64 stamps from inside the kernel (csrc/cuda/sm90.cu built
alone with -DFA_SM90_TRACE, tools/cabi.py), per CTA, tile and warpgroup, summarised as medians over the tiles.

Consumer phases of one tile (µs): qwait (its Q to land), first (block 0: Q Kᵀ, its turn, softmax),
loop (blocks 1..n-1, also per block), last (the last P V), epi (O normalised, staged, stored), gap
(to the next tile's start); a warpgroup with no rows in a tile (past Nq) leaves no stamps there. fixed = tile − n · per-block: what the tile costs beyond its blocks.
next_item: from the end of the epilogue to
the next item's position computed. Waits per block of the main loop: kv (the K and V stages to
land), turn (ping-pong), qk (Q Kᵀ to complete), pv (P V to complete); and the time spent issuing
the wgmmas (issue: both matmuls and the turn's hand-over), in the softmax (softmax), and the rest
of the block (rest: the O rescale, P packed, the loop). Producer: the span of its
loads per tile. The kernel's span and each CTA's end (globaltimer) show
the rounds. On the H200, after the build:

    python3 -m tools.sm90.trace [--shapes 4x16x4096 1x16x16384] [--d 128] [--causal]   # causal past 4k keys:
                                                           # the persistent grid
    python3 -m tools.sm90.trace --defines TRACE_NO_KV=1    # the probe: no K / V loads after the
                                                           # ring's first fill (wrong results)
--defines builds with other FA_SM90_* values (e.g. STORE_DEFER=0, D128L_BN=80 D128L_STAGES=3).
"""
import argparse
import ctypes
import math
import os
import statistics
import subprocess
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tools.cabi import REPO, family_library  # noqa: E402

TILES = 64          # FA_SM90_TRACE_TILES
BUILD = os.environ.get("BUILD", "/tmp/sm90_trace")


def tile_of(d, causal, nk, defines):
    """(BM, BN) of the tile sm90_dispatch picks (csrc/cuda/sm90.cu)."""
    if d <= 64:
        return (128, 128) if causal else (192, 128)
    if d <= 128:
        bn = int(dict(x.split("=") for x in defines).get("D128L_BN", 80))
        return (192, bn) if not causal and nk >= 2048 else (128, 128)
    return (128, 80)


def build(defines):
    os.makedirs(BUILD, exist_ok=True)
    so = f"{BUILD}/trace{''.join(d.replace('=', '') for d in defines)}.so"
    cmd = family_library("sm90", so, ["FA_SM90_TRACE"] + [f"FA_SM90_{d}" for d in defines], verbose_ptxas=False)
    if not (os.environ.get("TRACE_PREBUILT") and os.path.exists(so)):
        subprocess.run(cmd, check=True, cwd=REPO)
    return so


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def run(lib, B, H, N, d, causal, sms, defines):
    from triton.testing import do_bench
    from tools.sm90.tune import call
    # The trace indexes its stamps by CTA and the CTA's tile: causal calls past 4k keys, one CTA per
    # tile in production, run on the persistent grid here (its snake walk); a block's figures are
    # the same main loop's, the tile order and the gaps between tiles are not production's.
    grid_o = 2 if causal and N > 4096 else 0
    q, k, v = (torch.randn(B, H, N, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    o = torch.empty_like(q)
    buf = torch.zeros(sms * TILES * 4 * 16, dtype=torch.int64, device="cuda")
    flops = 4 * B * H * N * N * d / (2 if causal else 1)
    lib.fa_sm90_trace_set(ctypes.c_void_p(0))
    ms = do_bench(lambda: call(lib, q, k, v, o, causal, grid=grid_o), warmup=25, rep=100)
    lib.fa_sm90_trace_set(ctypes.c_void_p(buf.data_ptr()))
    ms_traced = do_bench(lambda: call(lib, q, k, v, o, causal, grid=grid_o), warmup=5, rep=20)
    buf.zero_()
    call(lib, q, k, v, o, causal, grid=grid_o)
    torch.cuda.synchronize()
    lib.fa_sm90_trace_set(ctypes.c_void_p(0))
    t = buf.view(sms, TILES, 4, 16).cpu().tolist()

    BM, BN = tile_of(d, causal, N, defines)
    cons = BM // 64
    n_q = -(-N // BM)
    n_tiles = B * H * n_q
    grid = min(sms, n_tiles)
    # clock rate from each consumer's first and last tile start (clock64 in slot 0, ns in slot 6)
    rates = []
    for c in range(grid):
        its = [i for i in range(TILES) if t[c][i][1][6]]
        if len(its) >= 2:
            a, b = t[c][its[0]][1], t[c][its[-1]][1]
            if b[6] > a[6]:
                rates.append((b[0] - a[0]) / (b[6] - a[6]))
    ghz = med(rates)
    us = lambda cyc: cyc / ghz / 1e3  # noqa: E731
    ph = {}
    ends, starts = [], []
    for c in range(grid):
        its = [i for i in range(TILES) if t[c][i][1][6]]
        if not its:
            continue
        starts.append(t[c][its[0]][1][6])
        last = t[c][its[-1]][1]
        ends.append(last[6] + us(last[5] - last[0]) * 1e3)
        for i in its[:-1]:
            m0 = t[c][i][1][13]                         # the tile's first row (slot 13)
            kind = "partial" if m0 + BM > N and N % BM else "full"
            nb = -(-min(N, m0 + BM if causal else N) // BN)
            if nb < 2:                                  # no main loop (a causal call's first tile)
                continue
            for wg in range(1, cons + 1):
                s, nxt = t[c][i][wg], t[c][i + 1][wg]
                if not s[0] or not nxt[0]:              # a warpgroup with no rows in the tile
                    continue
                loop = s[3] - s[2]
                per = loop / (nb - 1) if nb > 1 else float("nan")
                row = {"qwait": s[1] - s[0], "first": s[2] - s[1], "loop": loop, "per_block": per,
                       "last": s[4] - s[3], "epi": s[5] - s[4], "gap": nxt[0] - s[5], "tile": nxt[0] - s[0],
                       "fixed": (nxt[0] - s[0]) - nb * per, "next_item": nxt[12] - s[5],
                       "w_kv": s[8] / (nb - 1), "w_turn": s[9] / (nb - 1), "w_qk": s[10] / (nb - 1),
                       "w_pv": s[11] / (nb - 1), "w_issue": s[14] / (nb - 1), "w_softmax": s[15] / (nb - 1),
                       "w_rest": per - sum(s[k] for k in (8, 9, 10, 11, 14, 15)) / (nb - 1)}
                for key, x in row.items():
                    ph.setdefault((kind, wg, key), []).append(us(x))
            p0, pn = t[c][i][0], t[c][i + 1][0]
            for key, x in {"prod_q": p0[1] - p0[0], "prod_kv": p0[2] - p0[1], "prod_tile": pn[0] - p0[0]}.items():
                ph.setdefault((kind, 0, key), []).append(us(x))
    span = (max(ends) - min(starts)) / 1e3
    print(f"\nB={B} H={H} N={N} d={d} causal={int(causal)}: BM={BM} BN={BN}, {n_tiles} tiles on {grid} CTAs "
          f"({n_tiles / grid:.2f} rounds); {flops / ms / 1e9:.1f} TFLOP/s untraced, {flops / ms_traced / 1e9:.1f} "
          f"traced; clock {ghz:.3f} GHz; traced span {span:.1f} µs (call {ms * 1e3:.1f} µs)")
    starts_us = sorted((x - min(starts)) / 1e3 for x in starts)
    print(f"  CTA starts (µs from the first): 90% {starts_us[9 * len(starts_us) // 10]:.1f}, max {starts_us[-1]:.1f}")
    ends_us = sorted((e - min(starts)) / 1e3 for e in ends)
    print(f"  CTA ends (µs from the first start): min {ends_us[0]:.1f}, 10% {ends_us[len(ends_us) // 10]:.1f}, "
          f"median {med(ends_us):.1f}, 90% {ends_us[9 * len(ends_us) // 10]:.1f}, max {ends_us[-1]:.1f}")
    keys = ["tile", "fixed", "per_block", "qwait", "first", "loop", "last", "epi", "gap", "next_item"]
    wkeys = ["w_kv", "w_turn", "w_issue", "w_qk", "w_softmax", "w_pv", "w_rest"]
    for kind in ("full", "partial"):
        for wg in range(1, cons + 1):
            if (kind, wg, "tile") in ph:
                n = len(ph[(kind, wg, "tile")])
                print(f"  {kind:7} wg{wg} ({n:4} tiles) " +
                      " ".join(f"{key} {med(ph[(kind, wg, key)]):6.2f}" for key in keys))
                print(f"  {kind:7} wg{wg} per block (µs): " +
                      " ".join(f"{key[2:]} {med(ph[(kind, wg, key)]):6.3f}" for key in wkeys))
        if (kind, 0, "prod_tile") in ph:
            print(f"  {kind:7} producer        " +
                  " ".join(f"{key} {med(ph[(kind, 0, key)]):6.2f}" for key in ("prod_tile", "prod_q", "prod_kv")))


def main():
    ap = argparse.ArgumentParser(prog="python3 -m tools.sm90.trace", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", nargs="+", default=["4x16x4096", "4x18x4096", "2x16x8192", "1x16x16384"])
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--defines", nargs="*", default=[], help="e.g. Q_AHEAD=1 STORE_DEFER=1")
    ap.add_argument("--build-only", action="store_true")
    args = ap.parse_args()
    so = build(args.defines)
    if args.build_only:
        return
    lib = ctypes.CDLL(so)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"trace build: {' '.join(args.defines) or 'defaults'}")
    for shape in args.shapes:
        B, H, N = (int(x) for x in shape.split("x"))
        run(lib, B, H, N, args.d, args.causal, sms, args.defines)


if __name__ == "__main__":
    main()
