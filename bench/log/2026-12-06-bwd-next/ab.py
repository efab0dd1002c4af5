"""The Hopper backward with Q and dO on one stage barrier ("joint", today's kernel) against each on
its own ("split", fa_overrides.sm90_bwd_qdo), selected per call in one process and one build, timed
in rotated rounds (triton.testing.do_bench, default L2 flush) with SDPA's cuDNN backward beside them.
What is timed is torch.autograd.grad of a forward made once (the backward alone), TFLOP/s by
10·B·H·N²·d, halved when causal (bench/backward.py's formula). B · N = 16k, H · d = 2048. Before a
point's timings, dK and dV of the two settings must be the same bits. One JSON line per check and timing.

    PYTHONPATH=<build> python3 bench/log/2026-12-06-bwd-next/ab.py LABEL [rounds] >> ab.jsonl
"""
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

import torch_flashattn
from torch_flashattn._testing import overrides

label = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
gpu = torch.cuda.get_device_name()
bf, fp = torch.bfloat16, torch.float16
points = [(bf, d, N, c) for d in (64, 128) for c in (False, True) for N in (2048, 8192, 16384)]
points += [(fp, 64, 8192, False), (fp, 128, 8192, True)]


def backward_of(forward, q, k, v, dout):
    qq, kk, vv = (x.detach().clone().requires_grad_() for x in (q, k, v))
    out = forward(qq, kk, vv)
    return lambda: torch.autograd.grad(out, (qq, kk, vv), dout, retain_graph=True)


for dt, d, N, causal in points:
    B, H = 16384 // N, 2048 // d
    g = torch.Generator(device="cuda").manual_seed(N + d)
    q, k, v, dout = (torch.randn(B, H, N, d, dtype=dt, device="cuda", generator=g) for _ in range(4))
    ours = lambda a, b, c: torch_flashattn.attention(a, b, c, causal=causal)

    def cudnn(a, b, c):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(a, b, c, is_causal=causal)

    fns = {}
    for mode in ("joint", "split"):
        with overrides(family="sm90", sm90_bwd_qdo=mode):
            fns[mode] = (mode, backward_of(ours, q, k, v, dout))
    fns["sdpa-cudnn"] = (None, backward_of(cudnn, q, k, v, dout))
    grads = {}
    for mode in ("joint", "split"):
        with overrides(family="sm90", sm90_bwd_qdo=mode):
            grads[mode] = fns[mode][1]()
    same = all(torch.equal(grads["joint"][i], grads["split"][i]) for i in (1, 2))
    print(json.dumps({"label": label, "check": "dk_dv_same_bits", "dtype": str(dt)[6:], "d": d, "N": N,
                      "causal": causal, "ok": same}), flush=True)
    del grads
    names = list(fns)
    flops = 10 * B * H * N * N * d / (2 if causal else 1)
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            mode, fn = fns[n]
            with overrides(**({"family": "sm90", "sm90_bwd_qdo": mode} if mode else {})):
                ms = do_bench(fn, warmup=25, rep=100)
            print(json.dumps({"label": label, "gpu": gpu, "dtype": str(dt)[6:], "d": d, "N": N, "causal": causal,
                              "round": r, "who": n, "ms": ms, "tflops": flops / ms / 1e9}), flush=True)
    del fns
    torch.cuda.empty_cache()
