"""The production op against tune.py's variant library of the same tile, one process, interleaved.

Three ways into the same Hopper kernel (the SASS of the d = 128 fenced tile is identical in both
libraries, checked with cuobjdump): "op", torch.ops.fa.forward; "lib", fa_sm90_forward of the
production library (torch_flashattn._C) through ctypes, with a preallocated output and automatic
overrides; "var", fa_sm90_forward of tune.py's variant library (BUILD/d<d>_bn...so). Each round
times the three in a rotated order with triton.testing.do_bench (default L2 flush); bf16,
FlashAttention's grid (B·N = 16k, H·d = 2048). One JSON line per timing.

    BUILD=$PWD/_dev2/tune python3 bench/log/2026-12-05-prod-vs-variant/ab.py [rounds]
"""
import ctypes
import json
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
import torch_flashattn  # noqa: E402,F401
from tools.cabi import STRUCTS, fill_params  # noqa: E402
from tools.sm90 import tune  # noqa: E402
from triton.testing import do_bench  # noqa: E402

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
prod = ctypes.CDLL(torch_flashattn._C.__file__)
variants = {64: (64, 128, 2, 3, 1, {}), 128: (128, 128, 2, 2, 1, {})}
libs = dict(zip(variants, tune.build(list(variants.values()))))
gpu = torch.cuda.get_device_name()


def via(lib, q, k, v, o, causal):
    p, ov = fill_params(q, k, v, o, causal), STRUCTS["fa_overrides"]()
    st = lib.fa_sm90_forward(ctypes.byref(p), ctypes.byref(ov), None, ctypes.c_size_t(0),
                             ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    assert st == 0, st


for d, causal, N in [(128, True, 4096), (128, True, 8192), (128, True, 16384), (64, True, 16384),
                     (64, False, 8192), (64, False, 16384)]:
    B, H = 16384 // N, 2048 // d
    q, k, v = (torch.randn(B, H, N, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    o1, o2 = torch.empty_like(q), torch.empty_like(q)
    ref = torch.ops.fa.forward(q, k, v, None, causal)
    via(prod, q, k, v, o1, causal)
    via(libs[d], q, k, v, o2, causal)
    same = bool(torch.equal(ref, o1) and torch.equal(ref, o2))
    fns = {"op": lambda: torch.ops.fa.forward(q, k, v, None, causal),
           "lib": lambda: via(prod, q, k, v, o1, causal),
           "var": lambda: via(libs[d], q, k, v, o2, causal)}
    names = list(fns)
    flops = 4 * B * H * N * N * d / (2 if causal else 1)
    for r in range(rounds):
        order = names[r % 3:] + names[:r % 3]
        for name in order:
            ms = do_bench(fns[name], warmup=25, rep=100)
            print(json.dumps({"gpu": gpu, "d": d, "causal": causal, "N": N, "round": r, "who": name,
                              "ms": ms, "tflops": flops / ms / 1e9, "bitwise_same": same}), flush=True)
