"""Causal dense calls, FlashAttention's grid (B·N = 16k, H·d = 2048), fp16 and bf16: this build's
automatic tile order beside head by head (sm90_heads = 1, the order before sections) and FA3 (bf16)
where importable, timed call by call in turn. One JSON line per point: TFLOP/s; `same_bits`: both
orders give the same output.

    python3 sections.py LABEL [budget_s]"""
import json
import sys

import torch

import torch_flashattn
from bench.attention import time_interleaved
from torch_flashattn._testing import overrides

try:
    from fa3_fwd_interface import flash_attn_func as fa3
except ImportError:
    fa3 = None

label = sys.argv[1]
budget = float(sys.argv[2]) if len(sys.argv) > 2 else 0.3
for dtype in (torch.bfloat16, torch.float16):
    for d in (64, 128, 256):
        for N in (2048, 4096, 8192, 16384):
            B, H = 16384 // N, 2048 // d
            g = torch.Generator(device="cuda").manual_seed(0)
            q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=dtype, generator=g) for _ in range(3))

            def ours(**ov):
                def f():
                    with overrides(**ov):
                        return torch_flashattn.attention(q, k, v, causal=True)
                return f
            fns = {"auto": ours(), "heads1": ours(sm90_heads=1)}
            if fa3 is not None and dtype == torch.bfloat16:
                qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
                fns["fa3"] = lambda: fa3(qt, kt, vt, causal=True)
            same = torch.equal(fns["auto"](), fns["heads1"]())
            ms = time_interleaved(list(fns.values()), budget)
            fl = 2.0 * B * H * d * N * N
            row = {"build": label, "dtype": str(dtype).split(".")[1], "d": d, "N": N, "B": B, "H": H,
                   "same_bits": same}
            row.update({n: round(fl / (t * 1e-3) / 1e12, 1) for n, t in zip(fns, ms)})
            row["auto/heads1"] = round(row["auto"] / row["heads1"], 3)
            if "fa3" in row:
                row["auto/fa3"] = round(row["auto"] / row["fa3"], 3)
                row["heads1/fa3"] = round(row["heads1"] / row["fa3"], 3)
            print(json.dumps(row), flush=True)
