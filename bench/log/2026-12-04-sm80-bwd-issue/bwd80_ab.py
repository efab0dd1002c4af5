"""Dev A/B of the sm_80 backward kernel (forced) beside SDPA flash in the same process: TFLOP/s of
torch.autograd.grad, B*N = 16k, H*d = 2048. Usage: bwd80_ab.py LABEL [dtype]"""
import json, os, sys
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch_flashattn
from torch_flashattn._testing import overrides
from bench.attention import time_interleaved

label = sys.argv[1]
dt = torch.float16 if len(sys.argv) > 2 and sys.argv[2] == "fp16" else torch.bfloat16
Ns = [int(x) for x in os.environ.get("AB_N", "1024 4096 16384").split()]
torch.manual_seed(0)
for d in (128, 64):
    for causal in (False, True):
        for N in Ns:
            B, H = 16384 // N, 2048 // d
            q, k, v, do = (torch.randn(B, H, N, d, device="cuda", dtype=dt) for _ in range(4))
            qq, kk, vv = (x.requires_grad_() for x in (q, k, v))
            with overrides(family="sm80"):
                o = torch_flashattn.attention(qq, kk, vv, causal=causal)
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                o2 = F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal)
            def ours():
                with overrides(family="sm80"):
                    return torch.autograd.grad(o, (qq, kk, vv), do, retain_graph=True)
            def flash():
                return torch.autograd.grad(o2, (qq, kk, vv), do, retain_graph=True)
            ms = time_interleaved([ours, flash], 0.25)
            fl = 10 * B * H * N * N * d / (2 if causal else 1)
            t = [round(fl / x / 1e9, 1) for x in ms]
            print(json.dumps({"label": label, "d": d, "causal": causal, "N": N, "tflops": t[0], "flash": t[1],
                              "ratio": round(t[0] / t[1], 4)}), flush=True)
