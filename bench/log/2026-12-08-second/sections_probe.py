"""Issue 35: the packed (counter) walk's causal tiles in sections of S heads (sm90_heads on the packed
walk, fa_plan_sm90_packed_heads) against all of a sequence's heads in one section (S = Hq, the
default), and FlashAttention-3 (when importable). d = 128: our plain causal call (from 4097 keys the
counter walk over all heads) and the same call with sm90_grid="counter", sm90_heads = S, and on the
3-consumer 80-key tile (sm90_long_tile="on", "3c"); d = 64, 256:
the variant kernel on a window of N - 1 keys (the same work to 1 part in N) on the counter walk.
Timed call by call in turn (bench.attention.time_interleaved, L2 zero-filled); TFLOP/s over the causal
pairs, medians of the rounds; every section's output checked to be the same bits as S = Hq's.
bf16, H · d = 2048, B · N = 16k.   python3 sections_probe.py [rounds]"""
import importlib
import json
import sys

import torch

import torch_flashattn
from torch_flashattn._testing import overrides
from bench.attention import time_interleaved

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
try:
    fa3 = importlib.import_module("fa3_fwd_interface").flash_attn_func
except ImportError:
    fa3 = None
POINTS = ((128, 8192), (128, 16384), (128, 4096), (64, 8192), (256, 8192))
g = torch.Generator(device="cuda").manual_seed(0)
for d, N in POINTS:
    B, H = 16384 // N, 2048 // d
    q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    flops = 4.0 * d * H * B * N * (N + 1) / 2
    window = None if d == 128 else (N - 2, -1)

    def ours(grid, heads, long_tile="auto"):
        def fn():
            with overrides(sm90_grid=grid, sm90_heads=heads, sm90_long_tile=long_tile):
                return torch_flashattn.attention(q, k, v, causal=True, window=window)
        return fn
    fns = {"auto": ours("auto", 0)}
    for s in (H, 8, 4, 2):
        fns[f"counter S={s}"] = ours("counter", s)
    if d == 128:                                        # the walk on the 3-consumer 80-key tile
        fns["counter 3c"] = ours("counter", 0, "on")
        fns["counter 3c S=4"] = ours("counter", 4, "on")
    if fa3 is not None:
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        fns["fa3"] = lambda: fa3(qt, kt, vt, causal=True)
    ref = fns[f"counter S={H}"]()
    same = {n: bool(torch.equal(f(), ref)) for n, f in fns.items() if n.startswith("counter S")}
    if d == 128:                                        # another tile: other bits, its error against S = Hq's
        same["counter 3c max diff"] = (fns["counter 3c"]().float() - ref.float()).abs().max().item()
    per = {n: [] for n in fns}
    for _ in range(rounds):
        for n, t in zip(fns, time_interleaved(list(fns.values()), 0.5)):
            per[n].append(round(flops / t / 1e9, 1))
    med = {n: sorted(x)[len(x) // 2] for n, x in per.items()}
    row = {"d": d, "B": B, "N": N, "window": window, **per, "same bits as S=Hq": same}
    base = f"counter S={H}"
    row.update({f"{n} / {base}": round(med[n] / med[base], 3) for n in med if n != base})
    if "fa3" in med:
        row.update({f"{n} / fa3": round(med[n] / med["fa3"], 3) for n in med if n != "fa3"})
    print(json.dumps(row), flush=True)
