"""Packed sequences on the Hopper kernel: the persistent walk over the sequences' tiles, longest first
(sm90_grid "persistent") against two tiles per CTA ("tile"), and FlashAttention-3's varlen forward
where importable, timed call by call in turn (bench.attention.time_interleaved). bf16, H = 16. Prints
one JSON line per point; TFLOP/s over the visible query-key pairs. Needs a tree with packed_walk.diff
(or packed_walk_v1.diff) applied: on main, sm90_grid does not change packed calls."""
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


def main():
    budget = float(sys.argv[1]) if len(sys.argv) > 1 else 0.4
    H = 16
    try:
        from fa3_fwd_interface import flash_attn_varlen_func as fa3
    except ImportError:
        fa3 = None
    for d in (128, 64):
        for name in ("8x1k-4k asc", "8x1k-4k desc", "8x2560", "4x4k", "64x128-1k", "16x256-4k", "1x16k+15x1k"):
            for causal in (False, True):
                if d == 64 and name not in ("8x1k-4k asc", "16x256-4k"):
                    continue
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
                fns = {"walk": ours("persistent"), "pairs": ours("tile")}
                if fa3 is not None:
                    fns["fa3"] = lambda: fa3(q, k, v, cu, cu, n, n, causal=causal)
                a, b = fns["walk"](), fns["pairs"]()
                same = bool(torch.equal(a, b))
                ms = time_interleaved(list(fns.values()), budget)
                fl = 4.0 * d * H * pairs(lens, causal)
                row = {"d": d, "lens": name, "causal": causal, "same_bits": same}
                row.update({k_: round(fl / (t * 1e-3) / 1e12, 1) for k_, t in zip(fns, ms)})
                row["walk/pairs"] = round(row["walk"] / row["pairs"], 3)
                if "fa3" in row:
                    row["walk/fa3"] = round(row["walk"] / row["fa3"], 3)
                    row["pairs/fa3"] = round(row["pairs"] / row["fa3"], 3)
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
