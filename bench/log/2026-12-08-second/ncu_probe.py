"""Issue 35: one call each, for Nsight Compute (ncu_call.sh): our d = 128 causal call at 16k keys on the
counter walk over all 16 heads (S = 16) and in sections of 4 heads, then FlashAttention-3's. bf16,
B = 1, H = 16, N = 16384. Each runs twice (the first warms up)."""
import importlib

import torch

import torch_flashattn
from torch_flashattn._testing import overrides

q, k, v = (torch.randn(1, 16, 16384, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for s in (16, 4):
    with overrides(sm90_grid="counter", sm90_heads=s):
        for _ in range(2):
            torch_flashattn.attention(q, k, v, causal=True)
try:
    fa3 = importlib.import_module("fa3_fwd_interface").flash_attn_func
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    for _ in range(2):
        fa3(qt, kt, vt, causal=True)
except ImportError:
    pass
torch.cuda.synchronize()
