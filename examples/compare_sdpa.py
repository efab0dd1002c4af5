"""Call torch_flashattn.attention and compare it with PyTorch SDPA on the same inputs.

    python3 examples/compare_sdpa.py          # CUDA if present, else CPU; after pip install -e .
    PYTHONPATH=. python3 examples/compare_sdpa.py   # the same from the repository root after an
                                                    # in-place build (setup.py build_ext --inplace)
"""
import time

import torch
import torch.nn.functional as F

import torch_flashattn

device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = torch.bfloat16 if device == "cuda" else torch.float32
torch.manual_seed(0)
B, Hq, Hkv, N, d = 2, 8, 2, 1024, 64
q = torch.randn(B, Hq, N, d, device=device, dtype=dtype)
k = torch.randn(B, Hkv, N, d, device=device, dtype=dtype)
v = torch.randn(B, Hkv, N, d, device=device, dtype=dtype)


def timed(fn):
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(10):
        out = fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return out, (time.perf_counter() - t) / 10


ours, t_ours = timed(lambda: torch_flashattn.attention(q, k, v, causal=True))
ref, t_ref = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))
exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True, enable_gqa=True)
print(f"device {device}, {dtype}, B={B} Hq={Hq} Hkv={Hkv} N={N} d={d}, causal")
print(f"max |ours - fp64| = {(ours.double() - exact).abs().max().item():.2e}   "
      f"max |SDPA - fp64| = {(ref.double() - exact).abs().max().item():.2e}")
print(f"time: ours {t_ours * 1e3:.2f} ms, SDPA {t_ref * 1e3:.2f} ms")
