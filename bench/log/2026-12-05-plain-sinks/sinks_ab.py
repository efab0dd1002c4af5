"""Sinks on the plain Hopper kernels (this tree) against the variant kernel that ran them before
(OLD: a tree of the previous commit's csrc/, e.g. `git archive HEAD~1 csrc | tar -x -C $OLD`):
csrc/cuda/sm90.cu of each built alone (tools/cabi.py), called through ctypes with the scratch each
asks for. First the checks: the new library's sinks against a float64 reference (out and lse), its
−inf sinks bitwise equal to its plain call, and its plain calls bitwise equal to the old library's.
Then, in rotated rounds (triton.testing.do_bench, default L2 flush), per point: old plain, new plain,
old sinks (variant kernel), new sinks (plain kernel). bf16 unless named, B · N = 16k, H · d = 2048.
One JSON line each.

    OLD=/path/to/old/tree python3 bench/log/2026-12-05-plain-sinks/sinks_ab.py [rounds]
"""
import ctypes
import json
import math
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.getcwd())
from tools.cabi import STRUCTS, family_library, fill_params  # noqa: E402
from triton.testing import do_bench  # noqa: E402

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
BUILD = os.environ.get("BUILD", "/tmp/sinks_ab")
OLD = os.environ["OLD"]
os.makedirs(BUILD, exist_ok=True)
trees = {"old": OLD, "new": os.getcwd()}
procs = {n: subprocess.Popen(family_library("sm90", f"{BUILD}/{n}.so", verbose_ptxas=False), cwd=tree,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for n, tree in trees.items()}
libs = {}
for n, pr in procs.items():
    log = pr.communicate()[0]
    assert pr.returncode == 0, log[-3000:]
    libs[n] = ctypes.CDLL(f"{BUILD}/{n}.so")
gpu = torch.cuda.get_device_name()
scratch = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def call(lib, q, k, v, o, causal, sinks=None, lse=None):
    p, ov = fill_params(q, k, v, o, causal, lse=lse), STRUCTS["fa_overrides"]()
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    buf, size = ctypes.c_void_p(scratch.data_ptr()), ctypes.c_size_t(scratch.numel())
    if sinks is not None:
        var = STRUCTS["fa_variants"]()
        var.sinks = sinks.data_ptr()
        st = lib.fa_sm90_forward_variants(ctypes.byref(p), ctypes.byref(var), ctypes.byref(ov), buf, size, stream)
    else:
        st = lib.fa_sm90_forward(ctypes.byref(p), ctypes.byref(ov), buf, size, stream)
    assert st == 0, st


def reference(q, k, v, causal, sinks):
    """float64: softmax over the keys and the sink (a column with no value); lse of the whole sum."""
    B, H, Nq, d = q.shape
    Nk = k.shape[2]
    s = (q.double() @ k.double().transpose(-1, -2)) * d ** -0.5
    if causal:
        s = s.masked_fill(torch.ones(Nq, Nk, dtype=torch.bool, device=q.device).triu(1), -math.inf)
    s = torch.cat([s, sinks.double()[None, :, None, None].expand(B, H, Nq, 1)], -1)
    lse = torch.logsumexp(s, -1)
    pr = torch.exp(s - lse[..., None])[..., :Nk]
    return pr @ v.double(), lse


bad = 0
for dt in (torch.bfloat16, torch.float16):
    # (d, Nq, Nk, causal): each plain tile (d = 64 short causal and 3-consumer, d = 128 2-consumer,
    # fenced causal from 4k keys, the 3-consumer long-key tile, d = 256), tails, Nq != Nk.
    for d, Nq, Nk, causal in [(64, 700, 700, True), (64, 1500, 1500, True), (64, 333, 2100, False),
                              (128, 777, 777, True), (128, 4200, 4200, True), (128, 333, 2100, False),
                              (128, 1000, 3000, False), (256, 600, 600, True), (256, 300, 900, False)]:
        torch.manual_seed(d + Nq)
        B, H = 2, 4
        q = torch.randn(B, H, Nq, d, dtype=dt, device="cuda") * 2
        k, v = (torch.randn(B, H, Nk, d, dtype=dt, device="cuda") * 2 for _ in range(2))
        sinks = torch.randn(H, device="cuda") * 3
        ref, ref_lse = reference(q, k, v, causal, sinks)
        o, lse = torch.empty_like(q), torch.empty(B, H, Nq, device="cuda")
        call(libs["new"], q, k, v, o, causal, sinks, lse)
        torch_err = (ref.to(dt).double() - ref).abs().max().item()
        err = (o.double() - ref).abs().max().item()
        lse_err = (lse.double() - ref_lse).abs().max().item()
        outs = {}
        for n in ("old", "new"):
            outs[n] = torch.empty_like(q)
            call(libs[n], q, k, v, outs[n], causal)
        o_inf = torch.empty_like(q)
        call(libs["new"], q, k, v, o_inf, causal, torch.full((H,), -math.inf, device="cuda"))
        ok = (err <= 2 * torch_err + 1e-3 and lse_err <= 1e-4 * max(1.0, ref_lse.abs().max().item())
              and torch.equal(outs["old"], outs["new"]) and torch.equal(o_inf, outs["new"]))
        bad += not ok
        print(json.dumps({"check": "sinks", "dtype": str(dt)[6:], "d": d, "Nq": Nq, "Nk": Nk, "causal": causal,
                          "ok": ok, "err": err, "torch_err": torch_err, "lse_err": lse_err,
                          "plain_old_eq_new": torch.equal(outs["old"], outs["new"]),
                          "neg_inf_sinks_eq_plain": torch.equal(o_inf, outs["new"])}), flush=True)
print(json.dumps({"checks_failed": bad}), flush=True)

# WAIT_FOR: a file whose appearance the timing waits for (a build running beside the checks).
while os.environ.get("WAIT_FOR") and not os.path.exists(os.environ["WAIT_FOR"]):
    time.sleep(1)
points = [(torch.bfloat16, 128, N, c) for N in (4096, 8192) for c in (True, False)] + [
    (torch.bfloat16, 128, 16384, False), (torch.bfloat16, 64, 4096, True), (torch.bfloat16, 64, 8192, False),
    (torch.bfloat16, 256, 4096, True), (torch.float16, 128, 8192, True)]
for dt, d, N, causal in points:
    B, H = 16384 // N, 2048 // d
    q, k, v = (torch.randn(B, H, N, d, dtype=dt, device="cuda") for _ in range(3))
    o = torch.empty_like(q)
    sinks = torch.randn(H, device="cuda")
    fns = {f"{n}_{kind}": (lambda lib=lib, s=(sinks if kind == "sinks" else None): call(lib, q, k, v, o, causal, s))
           for kind in ("plain", "sinks") for n, lib in libs.items()}
    names = list(fns)
    flops = 4 * B * H * N * N * d / (2 if causal else 1)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            ms = do_bench(fns[name], warmup=25, rep=100)
            print(json.dumps({"gpu": gpu, "dtype": str(dt)[6:], "d": d, "N": N, "causal": causal, "round": r,
                              "who": name, "ms": ms, "tflops": flops / ms / 1e9}), flush=True)
