"""The block max of sm90_softmax as a tree over both rows (FA_SM90_MAX_TREE=1) against the chain
(0): csrc/cuda/sm90.cu built alone for each (tools/cabi.py), called through ctypes. The outputs must
be bitwise equal (the max is exact in any order); then the plain kernel (fa_sm90_forward) and the
softcap kernel (fa_sm90_forward_variants, softcap 30) are timed in a rotated order, round by round
(triton.testing.do_bench, default L2 flush); bf16, B · N = 16k, H · d = 2048. One JSON line each.

    python3 bench/log/2026-12-05-max-tree/tree_ab.py [rounds]
"""
import ctypes
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.getcwd())
from tools.cabi import STRUCTS, family_library, fill_params  # noqa: E402
from triton.testing import do_bench  # noqa: E402

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
BUILD = os.environ.get("BUILD", "/tmp/tree")
os.makedirs(BUILD, exist_ok=True)
procs = {t: subprocess.Popen(family_library("sm90", f"{BUILD}/tree{t}.so", [f"FA_SM90_MAX_TREE={t}"], verbose_ptxas=False),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for t in (0, 1)}
libs = {}
for t, pr in procs.items():
    log = pr.communicate()[0]
    assert pr.returncode == 0, log[-3000:]
    libs[t] = ctypes.CDLL(f"{BUILD}/tree{t}.so")
gpu = torch.cuda.get_device_name()


def call(lib, q, k, v, o, causal, softcap=0.0):
    p, ov = fill_params(q, k, v, o, causal), STRUCTS["fa_overrides"]()
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    if softcap:
        var = STRUCTS["fa_variants"]()
        var.softcap = softcap
        st = lib.fa_sm90_forward_variants(ctypes.byref(p), ctypes.byref(var), ctypes.byref(ov), None,
                                          ctypes.c_size_t(0), stream)
    else:
        st = lib.fa_sm90_forward(ctypes.byref(p), ctypes.byref(ov), None, ctypes.c_size_t(0), stream)
    assert st == 0, st


# Bitwise: awkward shapes, both dtypes, every head dim's tile, causal and not, with and without softcap.
bad = 0
for dt in (torch.bfloat16, torch.float16):
    for d in (64, 128, 256):
        for causal in (False, True):
            for cap in (0.0, 30.0):
                torch.manual_seed(d)
                q, k, v = (torch.randn(2, 4, 777, d, dtype=dt, device="cuda") * 3 for _ in range(3))
                outs = []
                for lib in libs.values():
                    o = torch.empty_like(q)
                    call(lib, q, k, v, o, causal, cap)
                    outs.append(o)
                ref = torch.nn.functional.scaled_dot_product_attention(
                    q.double(), k.double(), v.double(), is_causal=causal) if not cap else None
                same = torch.equal(outs[0], outs[1])
                err = (outs[1].double() - ref).abs().max().item() if ref is not None else None
                bad += not same
                print(json.dumps({"check": "bitwise", "dtype": str(dt)[6:], "d": d, "causal": causal, "softcap": cap,
                                  "same": same, "err_vs_fp64": err}), flush=True)
print(json.dumps({"checks_failed": bad}), flush=True)

points = [(d, N, causal, cap) for d in (128, 64, 256) for N in (4096, 16384) for causal in (False, True)
          for cap in (0.0,)] + [(128, 4096, False, 30.0), (128, 4096, True, 30.0), (64, 4096, False, 30.0),
                                (64, 8192, True, 30.0)]
for d, N, causal, cap in points:
    B, H = 16384 // N, 2048 // d
    q, k, v = (torch.randn(B, H, N, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    o = torch.empty_like(q)
    fns = {f"tree{t}": (lambda lib=lib: call(lib, q, k, v, o, causal, cap)) for t, lib in libs.items()}
    names = list(fns)
    flops = 4 * B * H * N * N * d / (2 if causal else 1)
    for r in range(rounds):
        for name in names[r % 2:] + names[:r % 2]:
            ms = do_bench(fns[name], warmup=25, rep=100)
            print(json.dumps({"gpu": gpu, "d": d, "N": N, "causal": causal, "softcap": cap, "round": r, "who": name,
                              "ms": ms, "tflops": flops / ms / 1e9}), flush=True)
