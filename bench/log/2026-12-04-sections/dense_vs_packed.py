"""Dense calls (B equal sequences) timed three ways in turn: our dense kernel, the same problem as
packed sequences (attention_varlen, the counter walk), FA3 dense and FA3 varlen. bf16.
One JSON line per point: TFLOP/s over the visible pairs."""
import json
import sys

import torch

import torch_flashattn
from bench.attention import time_interleaved

try:
    from fa3_fwd_interface import flash_attn_func as fa3, flash_attn_varlen_func as fa3v
except ImportError:
    fa3 = fa3v = None

POINTS = [(128, n, True) for n in (2048, 4096, 8192, 16384)] + [(64, n, True) for n in (4096, 8192, 16384)] \
    + [(256, n, True) for n in (4096, 8192)] + [(128, 4096, False), (128, 16384, False), (64, 16384, False)]
budget = float(sys.argv[1]) if len(sys.argv) > 1 else 0.3
for d, N, causal in POINTS:
    B, H = 16384 // N, 2048 // d
    g = torch.Generator(device="cuda").manual_seed(0)
    qd, kd, vd = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    qp, kp, vp = (x.transpose(1, 2).contiguous().view(B * N, H, d) for x in (qd, kd, vd))
    cu = torch.arange(0, B + 1, dtype=torch.int32, device="cuda") * N
    fns = {
        "dense": lambda: torch_flashattn.attention(qd, kd, vd, causal=causal),
        "packed": lambda: torch_flashattn.attention_varlen(qp, kp, vp, cu, cu, N, N, causal=causal),
    }
    if fa3 is not None:
        fns["fa3"] = lambda: fa3(qp.view(B, N, H, d), kp.view(B, N, H, d), vp.view(B, N, H, d), causal=causal)
        fns["fa3v"] = lambda: fa3v(qp, kp, vp, cu, cu, N, N, causal=causal)
    a = fns["dense"]().transpose(1, 2).reshape(B * N, H, d).float()
    b = fns["packed"]().float()
    err = (a - b).abs().max().item()
    ms = time_interleaved(list(fns.values()), budget)
    fl = 4.0 * B * H * d * N * N / (2 if causal else 1)
    row = {"d": d, "N": N, "B": B, "H": H, "causal": causal, "max_diff": err}
    row.update({k_: round(fl / (t * 1e-3) / 1e12, 1) for k_, t in zip(fns, ms)})
    if "fa3" in row:
        row["dense/fa3"] = round(row["dense"] / row["fa3"], 3)
        row["packed/fa3"] = round(row["packed"] / row["fa3"], 3)
    print(json.dumps(row), flush=True)
