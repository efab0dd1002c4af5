"""Dev A/B of the backward: TFLOP/s of torch.autograd.grad through torch_flashattn.attention, bf16,
B*N = 16k, H*d = 2048, L2 flushed (bench.attention.time_interleaved).
Usage: AB_D="64" AB_N="2048 4096" bwd_ab.py LABEL"""
import json, os, sys
import torch
import torch_flashattn
from bench.attention import time_interleaved

label = sys.argv[1]
print(label, torch_flashattn.__file__, file=sys.stderr)
torch.manual_seed(0)
for d in [int(x) for x in os.environ.get("AB_D", "64").split()]:
    for causal in (False, True):
        for N in [int(x) for x in os.environ.get("AB_N", "2048 4096 8192 16384").split()]:
            B, H = 16384 // N, 2048 // d
            q, k, v, do = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
            qq, kk, vv = (x.requires_grad_() for x in (q, k, v))
            o = torch_flashattn.attention(qq, kk, vv, causal=causal)
            fn = lambda: torch.autograd.grad(o, (qq, kk, vv), do, retain_graph=True)
            (ms,) = time_interleaved([fn], 0.25)
            fl = 10 * B * H * N * N * d / (2 if causal else 1)
            print(json.dumps({"label": label, "d": d, "causal": causal, "N": N, "tflops": round(fl / ms / 1e9, 1)}), flush=True)
