"""The causal grids in turn: one CTA per tile ("tile"), the persistent snake ("persistent") and the
persistent walk in pairs ("pairs"), each forced through sm90_grid (GRIDS picks them; "auto": the
rule), timed in a rotated order round by round (triton.testing.do_bench, default L2 flush); bf16,
H · d = 2048. One JSON line per timing; the outputs of the grids are compared bit for bit first.

    python3 bench/log/2026-12-05-pairs/grid_ab.py [rounds]

VARIANT=softcap, sinks, alibi or bottom_right times torch_flashattn.attention with that variant
(the variant kernels) instead of the plain op (prepared for the next session; not yet run).
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
import torch_flashattn  # noqa: E402,F401
from torch_flashattn._testing import overrides  # noqa: E402
from triton.testing import do_bench  # noqa: E402

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
variant = os.environ.get("VARIANT", "")
gpu = torch.cuda.get_device_name()
grids = os.environ.get("GRIDS", "tile,persistent,pairs").split(",")   # e.g. GRIDS=auto,tile,pairs
shapes = [(128, 8, 2048), (128, 4, 4096), (128, 2, 8192), (128, 1, 16384), (128, 1, 8192),
          (64, 4, 4096), (64, 1, 16384), (256, 4, 4096), (256, 2, 8192), (256, 1, 16384)]
for d, B, N in shapes:
    H = 2048 // d
    q, k, v = (torch.randn(B, H, N, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    kw = {"softcap": {"softcap": 30.0}, "sinks": {"sinks": torch.randn(H, device="cuda")},
          "alibi": {"alibi_slopes": torch.rand(H, device="cuda")},
          "bottom_right": {"causal_align": "bottom_right"}, "": None}[variant]

    def run():
        if kw is None:
            return torch.ops.fa.forward(q, k, v, None, True)
        return torch_flashattn.attention(q, k, v, causal=True, **kw)

    outs = {}
    for g in grids:
        with overrides(family="sm90", sm90_grid=g):
            outs[g] = run()
    same = all(torch.equal(outs[g], outs[grids[0]]) for g in grids)
    flops = 4 * B * H * N * N * d / 2
    for r in range(rounds):
        for g in grids[r % len(grids):] + grids[:r % len(grids)]:
            with overrides(family="sm90", sm90_grid=g):
                ms = do_bench(run, warmup=25, rep=100)
            print(json.dumps({"gpu": gpu, "variant": variant, "d": d, "B": B, "N": N, "round": r, "grid": g, "ms": ms,
                              "tflops": flops / ms / 1e9, "bitwise_same": same}), flush=True)
