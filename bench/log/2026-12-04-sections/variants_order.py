"""Causal variant calls that run on one CTA per tile (more than 4096 keys a row sees), bf16, d = 128,
H = 16: this build's automatic tile order (sections of heads) beside head by head (sm90_heads = 1),
timed call by call in turn in one process. One JSON line per point: TFLOP/s over the visible pairs.

    python3 variants_order.py LABEL [budget_s]"""
import json
import sys

import torch

import torch_flashattn
from bench.attention import time_interleaved
from bench.variants import make, point, visible_pairs
from torch_flashattn._testing import overrides

POINTS = [point("sliding (4096, 0), 16k", 1, 16384, 16384, causal=True, window=(4096, -1)),
          point("sliding (8192, 0), 16k", 1, 16384, 16384, causal=True, window=(8192, -1)),
          point("sinks causal, 8k", 2, 8192, 8192, causal=True, sinks=True),
          point("softcap 30 causal, 8k", 2, 8192, 8192, causal=True, softcap=30.0),
          point("ALiBi causal, 8k", 2, 8192, 8192, causal=True, alibi=True),
          point("padded batch causal 4 × 8k (40-100 %)", 4, 8192, 8192, causal=True, valid=(0.4, 1.0))]
label = sys.argv[1]
budget = float(sys.argv[2]) if len(sys.argv) > 2 else 0.3
H, d = 16, 128
for p in POINTS:
    made = make(p, H, d, torch.bfloat16)
    q, k, v, kw, lengths = made[:5]

    def run(**ov):
        def f():
            with overrides(**ov):
                return torch_flashattn.attention(q, k, v, **kw)
        return f
    fns = {"auto": run(), "heads1": run(sm90_heads=1)}
    same = torch.equal(fns["auto"](), fns["heads1"]())
    ms = time_interleaved(list(fns.values()), budget)
    fl = 4.0 * d * H * visible_pairs(p, lengths)
    row = {"build": label, "point": p["name"], "same_bits": same}
    row.update({n: round(fl / (t * 1e-3) / 1e12, 1) for n, t in zip(fns, ms)})
    row["auto/heads1"] = round(row["auto"] / row["heads1"], 3)
    print(json.dumps(row), flush=True)
