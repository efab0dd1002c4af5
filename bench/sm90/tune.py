"""Builds, checks and times tile variants of the Hopper kernel (csrc/fa_sm90.cu) in one GPU run.

Each variant is csrc/fa_sm90.cu compiled alone into a shared library with other
FA_SM90_D<d>_{BN,STAGES,CONSUMERS,PINGPONG} values (nvcc runs in parallel), loaded with ctypes and called
through fa_sm90_forward with a params struct that mirrors csrc/fa.h. Every variant is checked
against SDPA math on float64 over awkward shapes before it is timed next to the production kernel
(torch.ops.fa.forward with FA_KERNEL=sm90: its automatic grid, "auto", and each grid forced with
FA_SM90_PERSIST, "grid" = one CTA per tile; one CTA per SM with causal tiles walked rank-major,
"rank", or head-major as a snake, "snake", FA_SM90_ORDER; the last round not split along the keys, "tail0",
FA_SM90_TAIL=0, as the variants run, having no scratch) and SDPA's cudnn backend, on FlashAttention's grid
(bf16, B·N = 16k, H·d = 2048), with triton.testing.do_bench. On the H200, after the build:

    python3 bench/sm90/tune.py [--d 128] [--n 1k 4k 16k] [--no-variants]
"""
import argparse
import ctypes
import math
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

# (d, BN, STAGES, CONSUMERS, PINGPONG, other FA_SM90_* defines); the production tiles are timed
# through the op. LAZY: the lazy running max (sm90_softmax); LONG_NK: the 176-key d = 128 tile
# from that many keys on, non-causal; SOFTMAX_FENCE: 1 / 0 softmax_done on every tile / none;
# RESCALE_SKIP: 0 rescales O even when no row's max moved, 1 skips it per warp, 2 per group of 8 rows.
VARIANTS = [
    (64, 128, 2, 3, 1, {"RESCALE_SKIP": 0}),
    (128, 128, 2, 2, 1, {"RESCALE_SKIP": 0}), (128, 128, 2, 2, 1, {"SOFTMAX_FENCE": 1}),
    (128, 128, 2, 2, 1, {"LONG_NK": 1 << 40}),
    (256, 80, 2, 2, 1, {"RESCALE_SKIP": 0}),
]
if os.environ.get("TUNE_VARIANTS"):      # e.g. "128,176,2,2,1,LAZY=8;64,128,2,3,1"
    VARIANTS = [tuple(int(x) for x in v.split(",")[:5]) + (dict((kv.split("=")[0], int(kv.split("=")[1]))
                for kv in v.split(",")[5:]),) for v in os.environ["TUNE_VARIANTS"].split(";")]


def vname(v):
    short = {"LAZY": "L", "LONG_NK": "K", "SOFTMAX_FENCE": "F", "RESCALE_SKIP": "R"}
    return f"bn{v[1]}s{v[2]}c{v[3]}p{v[4]}" + "".join(f"{short.get(k, k)}{x}" for k, x in v[5].items())
# The production kernel's columns: the environment each runs under (csrc/fa_sm90.cu).
PROD = {"auto": {}, "grid": {"FA_SM90_PERSIST": "0"},
        "rank": {"FA_SM90_PERSIST": "1", "FA_SM90_ORDER": "rank"},
        "snake": {"FA_SM90_PERSIST": "1", "FA_SM90_ORDER": "snake"},
        "tail0": {"FA_SM90_TAIL": "0"}}
if os.environ.get("TUNE_PROD"):          # e.g. "auto": only those columns of the production kernel
    PROD = {k: PROD[k] for k in os.environ["TUNE_PROD"].split(",")}
BUILD = os.environ.get("BUILD", "/tmp/sm90_tune")


class Params(ctypes.Structure):
    _fields_ = [(n, ctypes.c_void_p) for n in ("q", "k", "v", "o", "lse")] + \
        [(f"{t}_{s}_stride", ctypes.c_int64) for t in "qkvo" for s in ("batch", "head", "row")] + \
        [(n, ctypes.c_int64) for n in ("B", "Hq", "Hkv", "Nq", "Nk", "d")] + \
        [("scale", ctypes.c_float), ("causal", ctypes.c_int), ("dtype", ctypes.c_int),
         ("num_threads", ctypes.c_int)]


def build(variants, load=True):
    os.makedirs(BUILD, exist_ok=True)
    procs = []
    for v in variants:
        d, bn, st, cons, pp, extra = v
        so = f"{BUILD}/d{d}_{vname(v)}.so"
        if os.environ.get("TUNE_PREBUILT") and os.path.exists(so):    # built elsewhere (same sources)
            procs.append((so, None))
            continue
        cmd = ["nvcc", "-std=c++17", "-O3", "-DNDEBUG", "-shared", "-Xcompiler", "-fPIC",
               "-gencode=arch=compute_90a,code=sm_90a", "-Icsrc", "-Xptxas", "-v",
               f"-DFA_SM90_D{d}_BN={bn}", f"-DFA_SM90_D{d}_STAGES={st}", f"-DFA_SM90_D{d}_CONSUMERS={cons}",
               f"-DFA_SM90_D{d}_PINGPONG={pp}"] + [f"-DFA_SM90_{k}={x}" for k, x in extra.items()] + \
              ["csrc/fa_sm90.cu", "-o", so]
        procs.append((so, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    libs = []
    for so, proc in procs:
        if proc is None:
            libs.append(ctypes.CDLL(so) if load else so)
            continue
        log = proc.communicate()[0]
        if proc.returncode != 0:
            print(f"build failed: {so}\n{log[-3000:]}")
            libs.append(None)
            continue
        spills = [line.strip() for line in log.splitlines() if "spill" in line and not line.strip().startswith("0 bytes stack frame, 0 bytes spill")]
        if spills:
            print(f"{os.path.basename(so)}: {spills[:2]}")
        libs.append(ctypes.CDLL(so) if load else so)
    return libs


def call(lib, q, k, v, o, causal, scale=None):
    p = Params()
    p.q, p.k, p.v, p.o, p.lse = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), None
    for name, t in zip("qkvo", (q, k, v, o)):
        setattr(p, f"{name}_batch_stride", t.stride(0))
        setattr(p, f"{name}_head_stride", t.stride(1))
        setattr(p, f"{name}_row_stride", t.stride(2))
    p.B, p.Hq, p.Nq, p.d = q.shape
    p.Hkv, p.Nk = k.shape[1], k.shape[2]
    p.scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    p.causal, p.dtype, p.num_threads = int(causal), 2 if q.dtype == torch.bfloat16 else 1, 0
    status = lib.fa_sm90_forward(ctypes.byref(p), ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    if status != 0:
        raise RuntimeError(f"fa_sm90_forward returned {status}")


def check(lib, d):
    """Our error <= 2 × SDPA's bf16 error + 1e-5 on awkward shapes; outputs poisoned first."""
    # The last three have more query tiles than the H200 has SMs: persistent CTAs take several.
    # Variants run with the production grid rule (csrc/fa_sm90.cu, sm90_persistent).
    for B, Hq, Hkv, Nq, Nk, causal in [(2, 4, 2, 300, 517, False), (2, 4, 2, 517, 300, True), (1, 2, 1, 1000, 1000, True),
                                       (3, 2, 2, 1, 700, False), (1, 1, 1, 129, 33, True),
                                       (4, 16, 4, 1000, 1000, True), (8, 8, 8, 777, 1025, False),
                                       (3, 32, 8, 2049, 2049, True)]:
        q = torch.randn(B, Hq, Nq, d, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(B, Hkv, Nk, d, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(B, Hkv, Nk, d, dtype=torch.bfloat16, device="cuda")
        o = torch.full_like(q, float("nan"))
        try:
            call(lib, q, k, v, o, causal)
        except RuntimeError as e:
            return str(e)
        with sdpa_kernel(SDPBackend.MATH):
            ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal, enable_gqa=True)
            pt = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        err, err_pt = (o.double() - ref).abs().max().item(), (pt.double() - ref).abs().max().item()
        if not err <= 2 * err_pt + 1e-5:
            return f"FAIL B={B} H={Hq}/{Hkv} Nq={Nq} Nk={Nk} causal={causal}: {err:.2e} vs {err_pt:.2e}"
    return "ok"


def main():
    import torch_flashattn  # noqa: F401  (torch.ops.fa; imported here: trace.py uses call() without it)
    from triton.testing import do_bench
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", nargs="+", type=int, default=[64, 128, 256])
    ap.add_argument("--n", nargs="+", default=["1k", "2k", "4k", "16k"])
    ap.add_argument("--no-variants", action="store_true", help="time the production kernel only")
    ap.add_argument("--build-only", action="store_true", help="build the variants into $BUILD and stop")
    args = ap.parse_args()
    ns = [int(x[:-1]) * 1024 if x.endswith("k") else int(x) for x in args.n]
    variants = [] if args.no_variants else [v for v in VARIANTS if v[0] in args.d]
    if args.build_only:
        for so in build(variants, load=False):
            print(so)
        return
    libs = build(variants)
    os.environ["FA_KERNEL"] = "sm90"
    for d in args.d:
        mine = [(v, lib) for v, lib in zip(variants, libs) if v[0] == d and lib is not None]
        status = [check(lib, d) for v, lib in mine]
        names = list(PROD) + ["cudnn"] + [vname(v) for v, _ in mine]
        print(f"\nd={d} TFLOP/s (bf16, B·N=16k, H·d=2048); checks: " +
              ", ".join(f"{vname(v)} {st}" for (v, _), st in zip(mine, status)))
        print("causal N      " + " ".join(f"{n:>17}" for n in names))
        logs = {n: [] for n in names}
        for causal in (False, True):
            for N in ns:
                B, H = 16384 // N, 2048 // d
                q, k, v = (torch.randn(B, H, N, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
                o = torch.empty_like(q)
                flops = 4 * B * H * N * N * d / (2 if causal else 1)
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    cudnn_ms = do_bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                        warmup=25, rep=100)
                row = []
                for j, name in enumerate(names):
                    if name == "cudnn":
                        ms = cudnn_ms
                    elif name in PROD:
                        os.environ.update(PROD[name])
                        ms = do_bench(lambda: torch.ops.fa.forward(q, k, v, None, causal), warmup=25, rep=100)
                        for var in PROD[name]:
                            del os.environ[var]
                    else:
                        vt, lib = mine[j - len(PROD) - 1]
                        if status[j - len(PROD) - 1] != "ok":
                            row.append(float("nan"))
                            continue
                        ms = do_bench(lambda: call(lib, q, k, v, o, causal), warmup=25, rep=100)
                    tf = flops / ms / 1e9
                    row.append(tf)
                    logs[name].append(math.log(tf))
                print(f"{int(causal):6} {N:5}  " + " ".join(f"{x:17.0f}" for x in row), flush=True)
        print("geomean       " + " ".join(f"{math.exp(sum(l) / len(l)) if l else float('nan'):17.0f}" for l in logs.values()))


if __name__ == "__main__":
    main()
