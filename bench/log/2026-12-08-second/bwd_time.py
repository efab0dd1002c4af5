"""Issue 37: the Hopper backward of the build on PYTHONPATH, timed (torch.autograd.grad of a forward made
once: the backward alone; triton.testing.do_bench, its default L2 flush), with SDPA's cuDNN backward
beside it as the call's drift reference; TFLOP/s by 10·B·H·N²·d, halved when causal (bench/backward.py's
formula). bf16 (and two fp16 points), B · N = 16k, H · d = 2048. Each point's dQ, dK, dV are saved under
$SAVE (a .pt per point) when set, so that two builds' gradients can be compared after. One JSON line each.

    PYTHONPATH=<build> python3 bwd_time.py LABEL >> bwd.jsonl
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

import torch_flashattn

label = sys.argv[1]
bf, fp = torch.bfloat16, torch.float16
points = [(bf, d, N, c) for d in (128, 64) for c in (True, False) for N in (2048, 8192)]
points += [(bf, 128, 16384, True), (fp, 128, 8192, True)]
for dt, d, N, causal in points:
    B, H = 16384 // N, 2048 // d
    g = torch.Generator(device="cuda").manual_seed(N + d)
    q, k, v, dout = (torch.randn(B, H, N, d, dtype=dt, device="cuda", generator=g) for _ in range(4))

    def backward_of(forward):
        qq, kk, vv = (x.detach().clone().requires_grad_() for x in (q, k, v))
        out = forward(qq, kk, vv)
        return lambda: torch.autograd.grad(out, (qq, kk, vv), dout, retain_graph=True)

    def cudnn(a, b, c):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(a, b, c, is_causal=causal)
    fns = {"fa": backward_of(lambda a, b, c: torch_flashattn.attention(a, b, c, causal=causal)),
           "sdpa-cudnn": backward_of(cudnn)}
    tag = f"{str(dt)[6:]}_d{d}_n{N}_{'c' if causal else 'nc'}"
    if os.environ.get("SAVE"):
        torch.save([x.cpu() for x in fns["fa"]()], os.path.join(os.environ["SAVE"], tag + ".pt"))
    flops = 10 * B * H * N * N * d / (2 if causal else 1)
    for who, fn in fns.items():
        ms = do_bench(fn, warmup=25, rep=100)
        print(json.dumps({"label": label, "point": tag, "who": who, "ms": ms, "tflops": flops / ms / 1e9}), flush=True)
    del fns
    torch.cuda.empty_cache()
