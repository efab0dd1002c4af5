"""The C interface (csrc/fa.h) for tools that load a kernel library with ctypes, and the nvcc line
that builds one kernel family's file alone into such a library.

The ctypes structs are read from fa.h itself (every `typedef struct { ... } name;`), so a tool
never carries a hand-written copy of fa_params that could drift from the header:

    from tools.cabi import STRUCTS, family_library
    p = STRUCTS["fa_params"]()
    so = family_library("sm90", "/tmp/x.so", defines=["FA_SM90_TRACE"])   # the nvcc command
"""
import ctypes
import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEADER = REPO / "csrc" / "fa.h"
# What a family's file needs beside itself when it is linked alone: status strings and the
# recorded CUDA error, device info, the planner (whichever of them exist).
SUPPORT = ("csrc/fa_common.c", "csrc/cuda/device.c", "csrc/cuda/plan.c")

_SCALARS = {"int64_t": ctypes.c_int64, "int32_t": ctypes.c_int32, "uint32_t": ctypes.c_uint32,
            "int": ctypes.c_int, "float": ctypes.c_float, "double": ctypes.c_double,
            "size_t": ctypes.c_size_t}


def _structs(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    enums = set(re.findall(r"typedef\s+enum\s*\{[^}]*\}\s*(\w+)\s*;", text))
    out = {}
    for body, name in re.findall(r"typedef\s+struct\s*\{([^}]*)\}\s*(\w+)\s*;", text):
        fields = []
        for decl in filter(None, (d.strip() for d in body.split(";"))):
            m = re.match(r"(?:const\s+)?(\w+)\s+(.*)", decl)
            base, names = m.group(1), m.group(2)
            for part in (x.strip() for x in names.split(",")):
                field = part.lstrip("*").strip()
                if part.startswith("*"):
                    ctype = ctypes.c_void_p
                elif base in out:
                    ctype = out[base]
                elif base in enums:
                    ctype = ctypes.c_int
                else:
                    ctype = _SCALARS[base]
                fields.append((field, ctype))
        out[name] = type(name, (ctypes.Structure,), {"_fields_": fields})
    return out


STRUCTS = _structs(HEADER.read_text())


def fill_params(q, k, v, o, causal, scale=None, lse=None):
    """An fa_params for (B, H, N, d) torch tensors on the GPU (dtype fp32, fp16 or bf16)."""
    import torch
    p = STRUCTS["fa_params"]()
    p.q, p.k, p.v, p.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
    p.lse = None if lse is None else lse.data_ptr()
    for name, t in zip("qkvo", (q, k, v, o)):
        setattr(p, f"{name}_batch_stride", t.stride(0))
        setattr(p, f"{name}_head_stride", t.stride(1))
        setattr(p, f"{name}_row_stride", t.stride(2))
    p.B, p.Hq, p.Nq, p.d = q.shape
    p.Hkv, p.Nk = k.shape[1], k.shape[2]
    p.scale = q.shape[-1] ** -0.5 if scale is None else scale
    p.causal = int(causal)
    p.dtype = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}[q.dtype]
    return p


def family_library(family, so, defines=(), arch="90a", verbose_ptxas=True):
    """The nvcc command that builds csrc/cuda/<family>.cu alone (with SUPPORT) into the shared
    library `so`; each define is passed as -D<define>. CABI_SPLIT=n: nvcc's --split-compile=n (the
    package's build splits sm90.cu over MAX_JOBS threads, setup.py)."""
    sources = [f"csrc/cuda/{family}.cu"] + [s for s in SUPPORT if (REPO / s).exists()]
    split = [f"--split-compile={os.environ['CABI_SPLIT']}"] if os.environ.get("CABI_SPLIT") else []
    return (["nvcc", "-std=c++17", "-O3", "-DNDEBUG", "-lineinfo", "-shared", "-Xcompiler", "-fPIC"] + split + [
             f"-gencode=arch=compute_{arch},code=sm_{arch}", "-Icsrc", "-DFA_WITH_CUDA"]
            + (["-Xptxas", "-v"] if verbose_ptxas else []) + [f"-D{d}" for d in defines] + sources
            + ["-o", str(so)])
