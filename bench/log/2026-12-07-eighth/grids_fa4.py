"""Causal windows on each Hopper grid (sm90_grid auto, tile, persistent, counter) beside
FlashAttention-4's CuTe forward, in turn (bench.attention.time_interleaved), at d = 64 (H = 32) and
d = 128 (H = 16), bf16, B·N = 16k; TFLOP/s over the visible pairs, medians of ROUNDS rounds.

    python3 bench/log/2026-12-07-eighth/grids_fa4.py [ROUNDS] [128]
"""
import json
import sys

import torch

import torch_flashattn
from torch_flashattn._testing import overrides
from bench.attention import time_interleaved
from bench.variants import fa4_call, point

GRIDS = ("auto", "tile", "persistent", "counter")
POINTS = [(d, B, N, left) for d in (64, 128) for B, N, left in ((4, 4096, 1024), (1, 16384, 1024),
                                                               (1, 16384, 4096), (2, 8192, 2048))]
# d = 128 alone (a second argument 128): windows on each side of the 4096 keys where the causal
# rule leaves the persistent grid.
POINTS_128 = [(128, B, N, left) for B, N, left in ((1, 16384, 4096), (2, 8192, 4096), (1, 16384, 8192),
                                                  (1, 16384, 6144), (2, 8192, 2048), (1, 16384, 1024))]


def main(rounds, points):
    rows = []
    for d, B, N, left in points:
        H = 2048 // d
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
        p = point("w", B, N, N, causal=True, window=(left, -1))
        flops = 4.0 * d * H * B * sum(min(i, left) + 1 for i in range(N))

        def ours(grid):
            def fn():
                with overrides(sm90_grid=grid):
                    return torch_flashattn.attention(q, k, v, causal=True, window=(left, -1))
            return fn
        fns = [ours(gr) for gr in GRIDS]
        f4 = fa4_call(p, q, k, v, dict(softcap=None))
        cols = GRIDS + (("fa4",) if f4 else ())
        if f4:
            fns.append(f4)
            o4 = f4()
            o4 = o4[0] if isinstance(o4, tuple) else o4           # (out, lse)
            err = (o4.transpose(1, 2).float() - fns[0]().float()).abs().max().item()
        per = {c: [] for c in cols}
        for _ in range(rounds):
            for c, t in zip(cols, time_interleaved(fns, 0.5)):
                per[c].append(round(flops / t / 1e9, 1))
        r = {"d": d, "B": B, "N": N, "left": left, "fa4_err": err if f4 else None, **per}
        print(json.dumps(r), flush=True)
        rows.append(r)
    med = lambda x: sorted(x)[len(x) // 2]   # noqa: E731
    print(f"causal windows, bf16, TFLOP/s over the visible pairs, medians of {rounds} rounds in turn")
    print("point".ljust(24) + "".join(c.rjust(11) for c in cols + ("best/fa4",)))
    for r in rows:
        best = max(med(r[c]) for c in GRIDS)
        print(f"d{r['d']} ({r['left']}, 0) {r['B']}x{r['N']}".ljust(24)
              + "".join(f"{med(r[c]):11.1f}" for c in cols)
              + (f"{best / med(r['fa4']):11.3f}" if "fa4" in r else ""))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, POINTS_128 if sys.argv[2:] == ["128"] else POINTS)
