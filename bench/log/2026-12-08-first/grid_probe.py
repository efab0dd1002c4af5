"""Issue 35: long causal calls on the counter walk. Our plain causal kernel at each grid (auto: one CTA
per tile from 4k keys; the persistent snake forced), the variant kernel on a window of N - 1 keys (all
but the first key of the last row: the same work to 1 part in N) on the counter walk and on one CTA per
tile, and FlashAttention-3 (when importable), timed call by call in turn (bench.attention.time_interleaved,
L2 zero-filled); TFLOP/s over the causal pairs, medians of the rounds. bf16, H · d = 2048, B · N = 16k.
python3 grid_probe.py [rounds [names]]: names, comma-separated, of the calls below (default: the first
five: plain auto, plain persistent, var counter, var tile, fa3). PROBE_D=128: those head dims only."""
import importlib
import json
import os
import sys

import torch

import torch_flashattn
from torch_flashattn._testing import overrides
from bench.attention import time_interleaved

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
names = sys.argv[2].split(",") if len(sys.argv) > 2 else ["plain auto", "plain persistent", "var counter", "var tile", "fa3"]
try:
    fa3 = importlib.import_module("fa3_fwd_interface").flash_attn_func
except ImportError:
    fa3 = None
POINTS = ((128, 4096), (128, 8192), (128, 16384), (64, 8192), (256, 8192))
POINTS = tuple(x for x in POINTS if str(x[0]) in os.environ.get("PROBE_D", "64,128,256").split(","))
g = torch.Generator(device="cuda").manual_seed(0)
for d, N in POINTS:
    B, H = 16384 // N, 2048 // d
    q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    flops = 4.0 * d * H * B * N * (N + 1) / 2

    def ours(grid, window):
        def fn():
            with overrides(sm90_grid=grid):
                if window:
                    torch_flashattn.attention(q, k, v, causal=True, window=(N - 2, -1))
                else:
                    torch_flashattn.attention(q, k, v, causal=True)
        return fn
    every = {"plain auto": ours("auto", False), "plain persistent": ours("persistent", False),
             "var counter": ours("counter", True), "var tile": ours("tile", True)}
    if fa3 is not None:
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        every["fa3"] = lambda: fa3(qt, kt, vt, causal=True)
    every.update({"plain tile": ours("tile", False), "plain pairs": ours("pairs", False),
                  "plain counter": ours("counter", False)})
    fns = {n: every[n] for n in names if n in every}
    with overrides(sm90_grid="tile"):
        ref = torch_flashattn.attention(q, k, v, causal=True).float()
    with overrides(sm90_grid="counter"):
        err = (torch_flashattn.attention(q, k, v, causal=True).float() - ref).abs().max().item()
    per = {n: [] for n in fns}
    for _ in range(rounds):
        for n, t in zip(fns, time_interleaved(list(fns.values()), 0.5)):
            per[n].append(round(flops / t / 1e9, 1))
    med = {n: sorted(x)[len(x) // 2] for n, x in per.items()}
    row = {"d": d, "B": B, "N": N, **per, "counter vs tile max diff": err}
    base = "fa3" if "fa3" in med else "plain auto"
    row.update({f"{n} / {base}": round(med[n] / med[base], 3) for n in med if n != base})
    print(json.dumps(row), flush=True)
