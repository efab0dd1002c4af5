"""Packed sequences, two query tiles per CTA (the default) against one per CTA and FlashAttention-3's
varlen forward, timed call by call in turn; bf16, H = 16. One JSON line per point, TFLOP/s over the
visible pairs. Needs a tree with packed_single.diff applied, where sm90_grid = "persistent" gives
packed calls one tile per CTA (on main it does not change them)."""
import json
import sys

import torch

import torch_flashattn
from bench.attention import time_interleaved
from torch_flashattn._testing import overrides

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from walks import lengths, pairs  # noqa: E402


def main():
    budget = float(sys.argv[1]) if len(sys.argv) > 1 else 0.3
    H = 16
    try:
        from fa3_fwd_interface import flash_attn_varlen_func as fa3
    except ImportError:
        fa3 = None
    for d in (128, 64):
        for name in ("8x1k-4k asc", "8x1k-4k desc", "8x2560", "4x4k", "64x128-1k", "16x256-4k"):
            for causal in (False, True):
                if d == 64 and name not in ("8x1k-4k asc", "4x4k"):
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
                fns = {"pairs": ours("auto"), "singles": ours("persistent")}
                if fa3 is not None:
                    fns["fa3"] = lambda: fa3(q, k, v, cu, cu, n, n, causal=causal)
                same = bool(torch.equal(fns["pairs"](), fns["singles"]()))
                ms = time_interleaved(list(fns.values()), budget)
                fl = 4.0 * d * H * pairs(lens, causal)
                row = {"d": d, "lens": name, "causal": causal, "same_bits": same}
                row.update({k_: round(fl / (t * 1e-3) / 1e12, 1) for k_, t in zip(fns, ms)})
                row["singles/pairs"] = round(row["singles"] / row["pairs"], 3)
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
