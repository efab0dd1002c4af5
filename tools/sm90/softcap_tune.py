"""Builds the Hopper kernel (csrc/cuda/sm90.cu, alone, tools/cabi.py) with other FA_SM90_EX2_FMA
values (how many of every 8 softmax exponentials run on the FMA pipe when a softcap is on), checks
each against a float64 reference of the softcap (with key_mask, a batch entry with no visible key,
a window and GQA) and times it beside the production op with and without the softcap, and
FlashAttention-3's softcap where it is importable (bf16). On the H200, after the build:

    python3 -m tools.sm90.softcap_tune [--fma 0 2 3 4] [--d 64 128 256]
"""
import argparse
import ctypes
import math
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tools.cabi import REPO, STRUCTS, family_library, fill_params  # noqa: E402

BUILD = os.environ.get("BUILD", "/tmp/sm90_softcap")


def build(values):
    os.makedirs(BUILD, exist_ok=True)
    procs = [(n, f"{BUILD}/fma{n}.so") for n in values]
    running = [subprocess.Popen(family_library("sm90", so, [f"FA_SM90_EX2_FMA={n}"]), cwd=REPO, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for n, so in procs]
    libs = {}
    for (n, so), proc in zip(procs, running):
        log = proc.communicate()[0]
        if proc.returncode != 0:
            print(f"build failed: fma{n}\n{log[-3000:]}")
            continue
        libs[n] = ctypes.CDLL(so)
    return libs


def call(lib, q, k, v, o, causal, softcap, key_mask=None, window=None):
    p = fill_params(q, k, v, o, causal)
    var, ov = STRUCTS["fa_variants"](), STRUCTS["fa_overrides"]()
    var.softcap = softcap
    if key_mask is not None:
        var.key_mask, var.key_mask_batch_stride = key_mask.data_ptr(), key_mask.stride(0)
    if window is not None:
        var.window, var.window_left, var.window_right = 1, window[0], window[1]
    status = lib.fa_sm90_forward_variants(ctypes.byref(p), ctypes.byref(var), ctypes.byref(ov),
                                          ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    if status != 0:
        raise RuntimeError(f"fa_sm90_forward_variants returned {status}")


def reference(q, k, v, causal, softcap, key_mask=None, window=None, dtype=torch.float64):
    """fa.h's semantics computed in dtype (float64: the reference; q's dtype: torch's own error):
    s = c·tanh(scale·q·k / c), masked, softmax, a row with no visible key 0."""
    Hq, Hkv = q.shape[1], k.shape[1]
    k, v = (x.to(dtype).repeat_interleave(Hq // Hkv, 1) for x in (k, v))
    s = q.to(dtype) @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    s = softcap * torch.tanh(s / softcap)
    i = torch.arange(q.shape[2], device=q.device)[:, None]
    j = torch.arange(k.shape[2], device=q.device)[None, :]
    vis = torch.ones_like(s, dtype=torch.bool)
    if causal:
        vis &= j <= i
    if window is not None:
        vis &= (j >= i - window[0]) if window[0] >= 0 else True
        vis &= (j <= i + window[1]) if window[1] >= 0 else True
    if key_mask is not None:
        vis &= key_mask[:, None, None, :].bool()
    s = s.masked_fill(~vis, float("-inf"))
    p = torch.softmax(s.float(), -1).nan_to_num(0.0).to(dtype)
    return p @ v


def check(lib, d, dtype):
    """Our error <= 2 × torch's error computing the same in dtype + 1e-5; outputs poisoned first."""
    for B, Hq, Hkv, Nq, Nk, causal, masked, window in [
            (2, 4, 2, 300, 517, False, True, None), (2, 4, 2, 517, 517, True, False, None),
            (3, 2, 1, 129, 700, False, True, (100, 40)), (1, 2, 2, 1000, 1000, True, False, (300, -1)),
            (4, 8, 8, 777, 1025, False, False, None)]:
        q = torch.randn(B, Hq, Nq, d, dtype=dtype, device="cuda") * 3
        k = torch.randn(B, Hkv, Nk, d, dtype=dtype, device="cuda") * 3
        v = torch.randn(B, Hkv, Nk, d, dtype=dtype, device="cuda")
        km = None
        if masked:
            km = (torch.rand(B, Nk, device="cuda") < 0.7).to(torch.uint8)
            km[0] = 0                                        # a batch entry that sees no key
        o = torch.full_like(q, float("nan"))
        call(lib, q, k, v, o, causal, 20.0, km, window)
        ref = reference(q, k, v, causal, 20.0, km, window)
        same = reference(q, k, v, causal, 20.0, km, window, dtype)
        err, err_t = (o.double() - ref).abs().max().item(), (same.double() - ref).abs().max().item()
        if not err <= 2 * err_t + 1e-5:
            return f"FAIL d={d} B={B} H={Hq}/{Hkv} Nq={Nq} Nk={Nk} causal={causal}: {err:.2e} vs {err_t:.2e}"
    return "ok"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fma", nargs="+", type=int, default=[0, 2, 3, 4])
    ap.add_argument("--d", nargs="+", type=int, default=[64, 128, 256])
    ap.add_argument("--n", nargs="+", default=["4k", "16k"])
    ap.add_argument("--softcap", type=float, default=30.0)
    args = ap.parse_args()
    import torch_flashattn
    from triton.testing import do_bench
    try:
        from fa3_fwd_interface import flash_attn_func as fa3
    except ImportError:
        fa3 = None
    libs = build(args.fma)
    for d in args.d:
        status = {n: check(lib, d, torch.bfloat16) for n, lib in libs.items()}
        print(f"\nd={d} checks: {status}")
        names = ["dense", "op"] + (["fa3"] if fa3 else []) + [f"fma{n}" for n in libs]
        print("causal     N " + " ".join(f"{x:>8}" for x in names) + "   (TFLOP/s, bf16, B·N = 16k, H·d = 2048)")
        logs = {x: [] for x in names}
        for causal in (False, True):
            for N in [int(x[:-1]) * 1024 if x.endswith("k") else int(x) for x in args.n]:
                B, H = 16384 // N, 2048 // d
                q, k, v = (torch.randn(B, H, N, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
                o = torch.empty_like(q)
                qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
                flops = 4 * B * H * N * N * d / (2 if causal else 1)
                calls = {"dense": lambda: torch_flashattn.attention(q, k, v, causal=causal),
                         "op": lambda: torch_flashattn.attention(q, k, v, causal=causal, softcap=args.softcap)}
                if fa3:
                    calls["fa3"] = lambda: fa3(qt, kt, vt, causal=causal, softcap=args.softcap)
                for n, lib in libs.items():
                    calls[f"fma{n}"] = lambda lib=lib: call(lib, q, k, v, o, causal, args.softcap)
                row = []
                for rnd in range(2):                         # two rounds, interleaved; the better kept
                    for x in names:
                        if x.startswith("fma") and status[int(x[3:])] != "ok":
                            tf = float("nan")
                        else:
                            tf = flops / do_bench(calls[x], warmup=25, rep=100) / 1e9
                        if rnd == 0:
                            row.append(tf)
                        else:
                            row[names.index(x)] = max(row[names.index(x)], tf)
                for x, tf in zip(names, row):
                    if tf == tf:
                        logs[x].append(math.log(tf))
                print(f"{int(causal):6} {N:5} " + " ".join(f"{x:8.0f}" for x in row), flush=True)
        print("geomean      " + " ".join(f"{math.exp(sum(l) / len(l)) if l else float('nan'):8.0f}"
                                         for l in logs.values()))


if __name__ == "__main__":
    main()
