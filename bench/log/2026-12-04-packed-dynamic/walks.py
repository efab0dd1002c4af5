"""Packed sequences on the Hopper kernel: this build's walks (sm90_grid "auto": the counter;
"persistent": every grid-th item; "tile": one item per CTA) beside FlashAttention-3's varlen forward
where importable, timed call by call in turn (bench.attention.time_interleaved). bf16, H = 16.
One JSON line per point, TFLOP/s over the visible query-key pairs, tagged with argv[1] (the build).
On main before the walk, every grid runs the pairs (two tiles per CTA).

    python3 walks.py LABEL [budget_s] [auto,persistent,tile]"""
import json
import sys

import torch

import torch_flashattn
from bench.attention import time_interleaved
from torch_flashattn._testing import overrides


def pairs(lens, causal):
    return sum(n * (n + 1) // 2 if causal else n * n for n in lens)


def lengths(name):
    g = torch.Generator().manual_seed(1)
    if name == "8x1k-4k asc":
        return [int(4096 * (0.25 + 0.75 * b / 7)) for b in range(8)]
    if name == "8x1k-4k desc":
        return [int(4096 * (0.25 + 0.75 * b / 7)) for b in range(8)][::-1]
    if name == "8x2560":
        return [2560] * 8
    if name == "4x4k":
        return [4096] * 4
    if name == "64x128-1k":
        return [int(x) for x in torch.randint(128, 1025, (64,), generator=g)]
    if name == "16x256-4k":
        return [int(x) for x in torch.randint(256, 4097, (16,), generator=g)]
    if name == "1x16k+15x1k":
        return [16384] + [1024] * 15
    raise ValueError(name)


POINTS = [(128, n) for n in ("8x1k-4k asc", "8x1k-4k desc", "8x2560", "4x4k", "64x128-1k", "16x256-4k",
                             "1x16k+15x1k")] + [(64, "8x1k-4k asc"), (64, "16x256-4k"), (256, "8x1k-4k asc")]


def main():
    label = sys.argv[1]
    budget = float(sys.argv[2]) if len(sys.argv) > 2 else 0.3
    grids = sys.argv[3].split(",") if len(sys.argv) > 3 else ["auto"]
    H = 16
    try:
        from fa3_fwd_interface import flash_attn_varlen_func as fa3
    except ImportError:
        fa3 = None
    for d, name in POINTS:
        for causal in (False, True):
            lens = lengths(name)
            g = torch.Generator(device="cuda").manual_seed(0)
            T = sum(lens)
            q, k, v = (torch.randn(T, H, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
            cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
            n = max(lens)

            def ours(grid):
                def f():
                    with overrides(sm90_grid=grid):
                        return torch_flashattn.attention_varlen(q, k, v, cu, cu, n, n, causal=causal)
                return f
            fns = {grid: ours(grid) for grid in grids}
            if fa3 is not None and d <= 256:
                fns["fa3"] = lambda: fa3(q, k, v, cu, cu, n, n, causal=causal)
            outs = [fns[grid]() for grid in grids]
            same = all(torch.equal(outs[0], o) for o in outs[1:])
            ms = time_interleaved(list(fns.values()), budget)
            fl = 4.0 * d * H * pairs(lens, causal)
            row = {"build": label, "d": d, "lens": name, "causal": causal, "same_bits": same}
            row.update({k_: round(fl / (t * 1e-3) / 1e12, 1) for k_, t in zip(fns, ms)})
            if "fa3" in row:
                for grid in grids:
                    row[f"{grid}/fa3"] = round(row[grid] / row["fa3"], 3)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
