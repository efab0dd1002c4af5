"""The Turing family forced (fp16, the grid of tools/ab_time.py at N 1k / 4k, d 64 / 128 / 256,
causal and not), TFLOP/s medians of triton.testing.do_bench; one JSON line.
    PYTHONPATH=<build> python3 turing_time.py LABEL >> turing.jsonl"""
import json
import sys

import torch
import triton

import torch_flashattn
from torch_flashattn import _testing

out = {"label": sys.argv[1], "tflops": {}}
torch.manual_seed(0)
with _testing.overrides(family="turing"):
    for d in (64, 128, 256):
        for n in (1024, 4096):
            for causal in (False, True):
                b, h = 16384 // n, 2048 // d
                q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
                ms = triton.testing.do_bench(lambda: torch_flashattn.attention(q, k, v, causal=causal), rep=60)
                out["tflops"][f"d{d}_n{n}_c{int(causal)}"] = round(4 * b * h * n * n * d / (2 if causal else 1) / ms / 1e9, 1)
print(json.dumps(out), flush=True)
