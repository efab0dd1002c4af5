"""A first check of the Hopper kernel, forced (overrides(family="sm90")): a few shapes against SDPA
math on float64, printed one line each (run under `timeout`: a pipeline bug shows as a hang).

    timeout 60 python3 -m tools.sm90.smoke
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_flashattn
from torch_flashattn._testing import overrides

CASES = [  # B, Hq, Hkv, Nq, Nk, d, causal
    (1, 1, 1, 128, 128, 64, False), (1, 1, 1, 128, 128, 128, False), (1, 1, 1, 128, 128, 256, False),
    (2, 4, 2, 300, 517, 64, False), (2, 4, 2, 300, 517, 128, True), (2, 4, 2, 517, 300, 256, True),
    (1, 2, 1, 1000, 1000, 80, True), (3, 2, 2, 1, 700, 128, False),
]
# the d = 128 three-consumer tile (non-causal; from 8k keys, forced here with sm90_long_tile="on"):
# tails, GQA, several tiles per CTA
LONG = [(2, 4, 2, 300, 2049, 128, False), (1, 2, 1, 385, 3000, 96, False), (4, 16, 16, 4096, 4096, 128, False)]
for dtype in (torch.bfloat16, torch.float16):
    for i, (B, Hq, Hkv, Nq, Nk, d, causal) in enumerate(CASES + LONG):
        q = torch.randn(B, Hq, Nq, d, dtype=dtype, device="cuda")
        k = torch.randn(B, Hkv, Nk, d, dtype=dtype, device="cuda")
        v = torch.randn(B, Hkv, Nk, d, dtype=dtype, device="cuda")
        with overrides(family="sm90", sm90_long_tile="on" if i >= len(CASES) else "auto"):
            out = torch_flashattn.attention(q, k, v, causal=causal)
        torch.cuda.synchronize()
        with sdpa_kernel(SDPBackend.MATH):
            ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal,
                                                 enable_gqa=True)
            pt = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        err = (out.double() - ref).abs().max().item()
        err_pt = (pt.double() - ref).abs().max().item()
        print(f"{str(dtype):15} B={B} H={Hq}/{Hkv} Nq={Nq:5} Nk={Nk:5} d={d:3} causal={int(causal)}  "
              f"err {err:.2e}  pytorch {err_pt:.2e}  {'ok' if err <= 2 * err_pt + 1e-5 else 'FAIL'}",
              flush=True)
