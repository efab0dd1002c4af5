"""Where huge scores start to give wrong rows on the CUDA kernels (README, Limits): q, k random
(1, 4, 512, 64), scale chosen so that the largest |scale · q · k| is about each target; every row
compared with a float64 softmax. A row is wrong when it is finite and off by more than 0.02 anywhere
(zero rows counted apart), non-finite when any element is inf or NaN. One line per
(family, dtype, target, path): plain = every row, family forced; decode = 32 query rows per head under
the automatic family (the split-KV kernel).

    python3 bench/log/2026-12-06-alibi-v3/score_limit.py > score_limit.txt
"""
import torch

import torch_flashattn
from torch_flashattn._testing import overrides

torch.manual_seed(0)
B, H, N, d = 1, 4, 512, 64
for family, path, nq in (("sm90", "plain", N), ("sm80", "plain", N), ("auto", "decode", 32)):
    for dt in (torch.float16, torch.bfloat16):
        q = torch.randn(B, H, N, d, device="cuda").to(dt)
        k = torch.randn(B, H, N, d, device="cuda").to(dt)
        v = torch.randn(B, H, N, d, device="cuda").to(dt)
        raw = torch.einsum("bhqd,bhkd->bhqk", q.double(), k.double())
        top = raw.abs().max().item()
        for target in (1e6, 1e7, 3e7, 1e8, 2e8, 4e8, 1e9, 3e9, 1e10):
            scale = target / top
            qq = q[:, :, :nq]
            ref = torch.softmax(raw[:, :, :nq] * scale, -1) @ v.double()
            with overrides(family=family):
                out = torch_flashattn.attention(qq, k, v, scale=scale).double()
            fin = torch.isfinite(out).all(-1)
            err = (out - ref).abs().amax(-1)
            zero = (out == 0).all(-1)
            wrong = fin & (err > 0.02) & ~zero
            rows = fin.numel()
            print(f"{family} {str(dt)[6:]:8s} score {target:8.0e} {path:6s} rows {rows:5d} | wrong {int(wrong.sum()):4d}"
                  f" zero {int(zero.sum()):4d} non-finite {int((~fin).sum()):4d} | worst finite err "
                  f"{err[fin].max().item() if fin.any() else float('nan'):.3g}", flush=True)
