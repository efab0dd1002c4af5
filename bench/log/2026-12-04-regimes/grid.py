"""Causal dense: our grid auto / forced tile / forced persistent beside FA3, two regimes."""
import json, sys
import torch, triton
import torch_flashattn
from torch_flashattn._testing import overrides
from bench.variants import point, make, fa3_call
from regime import inter  # this folder


def forced(fn, g):
    def run():
        with overrides(sm90_grid=g):
            return fn()
    return run

for d, B, N in [(128, 3, 6144), (128, 2, 8192), (128, 1, 8192), (128, 1, 12288), (128, 4, 8192)]:
    H = 2048 // d
    p = point(f"d{d} causal {N}", B, N, N, causal=True)
    q, k, v, kw, lengths = make(p, H, d, torch.bfloat16)
    flops = 4.0 * d * H * B * N * (N + 1) / 2
    ours = lambda: torch_flashattn.attention(q, k, v, causal=True)
    calls = {"auto": ours, "tile": forced(ours, "tile"), "persistent": forced(ours, "persistent"), "fa3": fa3_call(p, q, k, v)}
    names, fns = list(calls), list(calls.values())
    for f in fns: f()
    torch.cuda.synchronize()
    res = {"interleaved": inter(fns, 200, 200_000),
           "do_bench": [triton.testing.do_bench(f, warmup=25, rep=300, return_mode="median") for f in fns]}
    for reg, ms in res.items():
        print(json.dumps({"point": p["name"], "regime": reg, **{n: round(flops / t / 1e9, 1) for n, t in zip(names, ms)}}), flush=True)
