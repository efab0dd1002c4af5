"""The softcap kernels' exponentials partly on the FMA units (ex2_fma), FA_SM90_CAP_EMU = 0, 2, 3, 4
of every 8 scores: csrc/cuda/sm90.cu built alone per value (tools/cabi.py), called through
fa_sm90_forward_variants with ctypes. Each library is first checked against a float64 reference
(softcap, ALiBi, causal, a key_mask hiding one batch entry's every key, a NaN key), then the
libraries and the plain kernel (no variants, library 0) are timed in a rotated order round by round
(triton.testing.do_bench, default L2 flush); bf16, H · d = 2048, B · N = 16k. One JSON line each.

    git apply bench/log/2026-12-05-softcap-emu/cap_emu.patch      # ex2_fma, FA_SM90_CAP_EMU
    python3 bench/log/2026-12-05-softcap-emu/emu_ab.py [rounds]
"""
import ctypes
import json
import math
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.getcwd())
from tools.cabi import STRUCTS, family_library, fill_params  # noqa: E402
from triton.testing import do_bench  # noqa: E402

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
EMUS = [int(x) for x in os.environ.get("EMUS", "0,2,3,4").split(",")]
BUILD = os.environ.get("BUILD", "/tmp/emu")
os.makedirs(BUILD, exist_ok=True)
procs = {e: subprocess.Popen(family_library("sm90", f"{BUILD}/emu{e}.so", [f"FA_SM90_CAP_EMU={e}"], verbose_ptxas=False),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for e in EMUS}
libs = {}
for e, pr in procs.items():
    log = pr.communicate()[0]
    assert pr.returncode == 0, log[-3000:]
    libs[e] = ctypes.CDLL(f"{BUILD}/emu{e}.so")
gpu = torch.cuda.get_device_name()
stream = lambda: ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)  # noqa: E731


def call(lib, q, k, v, o, causal, softcap=0.0, slopes=None, key_mask=None, plain=False):
    p, ov = fill_params(q, k, v, o, causal), STRUCTS["fa_overrides"]()
    if plain:
        st = lib.fa_sm90_forward(ctypes.byref(p), ctypes.byref(ov), None, ctypes.c_size_t(0), stream())
    else:
        var = STRUCTS["fa_variants"]()
        var.softcap = softcap
        if slopes is not None:
            var.alibi_slopes = slopes.data_ptr()
        if key_mask is not None:
            var.key_mask, var.key_mask_batch_stride = key_mask.data_ptr(), key_mask.stride(0)
        st = lib.fa_sm90_forward_variants(ctypes.byref(p), ctypes.byref(var), ctypes.byref(ov), None,
                                          ctypes.c_size_t(0), stream())
    assert st == 0, st


def reference(q, k, v, causal, softcap, slopes, key_mask):
    q, k, v = (t.double() for t in (q, k, v))
    Nq, Nk = q.shape[2], k.shape[2]
    s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(Nq, device=q.device)[:, None]
    j = torch.arange(Nk, device=q.device)[None, :]
    if slopes is not None:
        s = s - slopes.double()[None, :, None, None] * (i - j).abs()
    vis = torch.ones(Nq, Nk, dtype=torch.bool, device=q.device)[None, None]
    if causal:
        vis = vis & (j <= i)
    if key_mask is not None:
        vis = vis & (key_mask != 0)[:, None, None, :]
    s = s.masked_fill(~vis, -math.inf)
    pr = torch.softmax(s, -1).nan_to_num(0.0) if key_mask is not None else torch.softmax(s, -1)
    return pr @ v


bad = 0
for dt in (torch.bfloat16, torch.float16):
    for d in (64, 128, 256):
        for causal in (False, True):
            for kind in ("softcap", "alibi", "softcap+key_mask", "softcap+nan"):
                torch.manual_seed(d + causal)
                B, H, N = 2, 4, 700
                q, k, v = (torch.randn(B, H, N, d, dtype=dt, device="cuda") * 2 for _ in range(3))
                slopes = torch.rand(H, device="cuda") if kind == "alibi" else None
                cap = 0.0 if kind == "alibi" else 5.0
                km = None
                if kind == "softcap+key_mask":
                    km = (torch.rand(B, N, device="cuda") > 0.3).to(torch.uint8)
                    km[1] = 0                                           # entry 1: no key at all
                if kind == "softcap+nan":
                    k[0, 1, 37, 5] = float("nan")                       # key 37 of head 1: NaN rows
                ref = reference(q, k, v, causal, cap, slopes, km)
                errs = {}
                for e, lib in libs.items():
                    o = torch.empty_like(q)
                    call(lib, q, k, v, o, causal, cap, slopes, km)
                    torch.cuda.synchronize()
                    nan_ok = torch.equal(o.isnan(), ref.isnan())
                    finite = ~ref.isnan()
                    errs[e] = ((o.double() - ref)[finite].abs().max().item(), nan_ok)
                torch_err = (reference(q, k, v, causal, cap, slopes, km).to(dt).double() - ref)[~ref.isnan()].abs().max().item()
                base = errs[EMUS[0]][0]
                ok = all(n and x <= 1.5 * base + 2 * torch_err + 1e-3 for x, n in errs.values())
                bad += not ok
                print(json.dumps({"check": kind, "dtype": str(dt)[6:], "d": d, "causal": causal, "ok": ok,
                                  "torch_err": torch_err, "errs": {str(e): x for e, x in errs.items()}}), flush=True)
print(json.dumps({"checks_failed": bad}), flush=True)

points = [(d, N, causal, kind) for d in (128, 64, 256) for N in (4096, 8192) for causal in (False, True)
          for kind in ("softcap",)] + [(128, 4096, False, "alibi"), (128, 4096, True, "alibi")]
for d, N, causal, kind in points:
    B, H = 16384 // N, 2048 // d
    q, k, v = (torch.randn(B, H, N, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    o = torch.empty_like(q)
    slopes = torch.rand(H, device="cuda") * 0.01 if kind == "alibi" else None
    cap = 30.0 if kind == "softcap" else 0.0
    fns = {f"emu{e}": (lambda lib=lib: call(lib, q, k, v, o, causal, cap, slopes)) for e, lib in libs.items()}
    fns["dense"] = lambda: call(libs[EMUS[0]], q, k, v, o, causal, plain=True)
    names = list(fns)
    flops = 4 * B * H * N * N * d / (2 if causal else 1)
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            ms = do_bench(fns[name], warmup=25, rep=100)
            print(json.dumps({"gpu": gpu, "kind": kind, "d": d, "N": N, "causal": causal, "round": r, "who": name,
                              "ms": ms, "tflops": flops / ms / 1e9}), flush=True)
