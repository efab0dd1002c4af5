"""The d = 128 counter rule (fa_plan_sm90_counter's FA_SM90_COUNTER_IMBALANCE) at causal windows:
auto (the rule), the persistent snake and the counter walk forced, and one CTA per tile, timed call by
call in turn (bench.attention.time_interleaved, L2 zero-filled), TFLOP/s over the visible pairs,
medians of the rounds; bf16, H = 16. python3 rule_check.py [rounds]"""
import json
import sys

import torch

import torch_flashattn
from torch_flashattn._testing import overrides
from bench.attention import time_interleaved

POINTS = ((1, 16384, 2048), (1, 16384, 4095), (16, 1024, 256), (16, 1024, 512), (8, 2048, 128),
          (8, 2048, 512), (2, 8192, 2048))   # (B, N, left); modelled 1.096, 1.174, 1.138, 1.194, 1.053, 1.103, 1.031
GRIDS = ("auto", "persistent", "counter", "tile")
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
d, H = 128, 16
g = torch.Generator(device="cuda").manual_seed(0)
for B, N, left in POINTS:
    q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    flops = 4.0 * d * H * B * sum(min(i + 1, left + 1) for i in range(N))

    def call(grid):
        def fn():
            with overrides(sm90_grid=grid):
                torch_flashattn.attention(q, k, v, causal=True, window=(left, -1))
        return fn
    per = {gr: [] for gr in GRIDS}
    for _ in range(rounds):
        for gr, t in zip(GRIDS, time_interleaved([call(gr) for gr in GRIDS], 0.5)):
            per[gr].append(round(flops / t / 1e9, 1))
    med = {gr: sorted(x)[len(x) // 2] for gr, x in per.items()}
    print(json.dumps({"B": B, "N": N, "left": left, **per,
                      "auto/persistent": round(med["auto"] / med["persistent"], 3),
                      "counter/persistent": round(med["counter"] / med["persistent"], 3)}), flush=True)
