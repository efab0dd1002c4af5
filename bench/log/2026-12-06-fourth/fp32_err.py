"""Our fp32 error over PyTorch's (both against the float64 reference, conftest.assert_accurate's
measure) on random calls, per fp32 family forced: d 64-256, scale 2 / default / 0.5, N up to 512.
    PYTHONPATH=<tree> python3 fp32_err.py <label> [families...]     (prints one JSON line a family)"""
import json
import math
import random
import statistics
import sys

import torch

sys.path.insert(0, "tests")
import torch_flashattn                                   # noqa: E402
from torch_flashattn import _testing                     # noqa: E402
from conftest import pytorch_same_dtype, reference       # noqa: E402

label, families = sys.argv[1], sys.argv[2:] or ["fp32", "simt"]
for family in families:
    ratios = {}
    for seed in range(150):
        rng = random.Random(seed)
        d, scale = rng.randint(64, 256), [2.0, None, 0.5][seed % 3]
        B, H, nq, nk, causal = 1, 2, rng.randint(1, 512), rng.randint(1, 512), rng.random() < 0.5
        g = torch.Generator(device="cuda").manual_seed(seed)
        q, k, v = (torch.randn(B, H, n, d, device="cuda", generator=g) for n in (nq, nk, nk))
        with _testing.overrides(family=family):
            out = torch_flashattn.attention(q, k, v, causal=causal, scale=scale)
        ref = reference(q, k, v, causal, scale)
        err = (out.double() - ref).abs().max().item()
        err_pt = (pytorch_same_dtype(q, k, v, causal, scale).double() - ref).abs().max().item()
        ratios.setdefault(str(scale), []).append(err / max(err_pt, 1e-30))
    row = {"label": label, "family": family}
    for s, r in ratios.items():
        row[s] = {"median": round(statistics.median(r), 3), "max": round(max(r), 3)}
    print(json.dumps(row), flush=True)
