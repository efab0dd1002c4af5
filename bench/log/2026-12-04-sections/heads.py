"""Dense causal calls, bf16, FlashAttention's grid (B·N = 16k, H·d = 2048): our kernel with the tile
order in sections of G heads (sm90_heads) on one CTA per tile, and on the automatic grid, beside FA3
in turn. One JSON line per point: TFLOP/s; same_bits: every order gives the automatic grid's bits."""
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
budget = float(sys.argv[2]) if len(sys.argv) > 2 else 0.2
widths = [int(x) for x in sys.argv[3].split(",")] if len(sys.argv) > 3 else [64, 128, 256]
for d in widths:
    for N in (2048, 4096, 8192, 16384):
        B, H = 16384 // N, 2048 // d
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))

        def ours(**ov):
            def f():
                with overrides(**ov):
                    return torch_flashattn.attention(q, k, v, causal=True)
            return f
        fns = {"auto": ours()}
        for G in (1, 2, 4, 8, 16, B * H):
            if G <= B * H and f"t{G}" not in fns:
                fns[f"t{G}"] = ours(sm90_grid="tile", sm90_heads=G)
        if N <= 4096:
            fns["p4"] = ours(sm90_grid="persistent", sm90_heads=4)
        if fa3 is not None:
            qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
            fns["fa3"] = lambda: fa3(qt, kt, vt, causal=True)
        ref = fns["auto"]()
        same = all(torch.equal(ref, fns[n]()) for n in fns if n not in ("auto", "fa3"))
        ms = time_interleaved(list(fns.values()), budget)
        fl = 2.0 * B * H * d * N * N
        row = {"build": label, "d": d, "N": N, "B": B, "H": H, "same_bits": same}
        row.update({n: round(fl / (t * 1e-3) / 1e12, 1) for n, t in zip(fns, ms)})
        print(json.dumps(row), flush=True)
