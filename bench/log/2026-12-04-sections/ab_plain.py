"""The dense calls that sections leave head by head (non-causal; causal on the persistent grid, up to
4k keys), with whichever torch_flashattn is first on the path, all points timed call by call in turn
(bench.attention.time_interleaved), for a before/after of two builds run in alternating processes.
FlashAttention's grid, bf16. One JSON line: TFLOP/s per point.

    PYTHONPATH=<build> python3 ab_plain.py LABEL [budget_s]"""
import json
import sys

import torch

import torch_flashattn
from bench.attention import time_interleaved

label = sys.argv[1]
budget = float(sys.argv[2]) if len(sys.argv) > 2 else 0.4
points, fns = [], []
for d in (64, 128, 256):
    for n, causal in ((1024, False), (8192, False), (1024, True), (4096, True)):
        b, h = 16384 // n, 2048 // d
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
        points.append((f"d{d}_n{n}_c{int(causal)}", 4 * b * h * n * n * d / (2 if causal else 1)))
        fns.append(lambda q=q, k=k, v=v, causal=causal: torch_flashattn.attention(q, k, v, causal=causal))
ms = time_interleaved(fns, budget)
print(json.dumps({"label": label, **{key: round(fl / (t * 1e-3) / 1e12, 1) for (key, fl), t in zip(points, ms)}}))
