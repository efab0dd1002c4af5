"""Shared test helpers: the upcast SDPA reference and FlashAttention's accuracy rule.

GPU tests carry the `gpu` marker and are skipped when no CUDA device is present.
"""
import contextlib
import math
import os

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_flashattn  # noqa: F401  (registers torch.ops.fa)
from torch_flashattn._testing import overrides

HAS_CUDA = torch.cuda.is_available()

# The tiny absolute slack added to 2 × PyTorch's own error (FlashAttention's rule).
SLACK = {torch.float32: 2e-6, torch.float16: 1e-5, torch.bfloat16: 1e-5}


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_runtest_logreport(report):
    """FA_FAILURES=<path>: each failing test's id appended to that file the moment its report
    arrives (under pytest-xdist, in the controller), so that a run cut short by a time limit still
    names its failures; pytest's own summary comes only at the end."""
    path = os.environ.get("FA_FAILURES")
    if path and report.failed and not os.environ.get("PYTEST_XDIST_WORKER"):   # the controller's copy
        with open(path, "a") as f:
            f.write(f"{report.nodeid} ({report.when})\n")


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
# Every kernel family: the CPU backend, CUDA's automatic choice, and each CUDA family forced
# through the family override (see csrc/cuda/dispatch.cu).
KERNELS = DEVICES + [pytest.param(f"cuda-{family}", marks=pytest.mark.gpu)
                     for family in ("sm80", "fp32", "simt", "turing")]
FAMILY_DTYPES = {"sm80": (torch.float16, torch.bfloat16), "sm90": (torch.float16, torch.bfloat16),
                 "fp32": (torch.float32,), "turing": (torch.float16,)}
# The Hopper family, forced, where the randomized tests run every family by name (elsewhere
# "cuda" is that family on compute capability 9.0 for fp16 and bf16).
SM90 = pytest.param("cuda-sm90", marks=pytest.mark.gpu)


@pytest.fixture
def fa_overrides():
    """force(**fields) forces fields of the CUDA backend's overrides (torch_flashattn._testing.overrides,
    csrc/fa.h fa_overrides) until the test ends; later calls add to earlier ones."""
    with contextlib.ExitStack() as stack:
        def force(**fields):
            stack.enter_context(overrides(**fields))
        yield force


def use_kernel(kernel, dtype, fa_overrides):
    """Selects a KERNELS entry: forces its kernel family and returns the torch device.
    Skips dtypes the forced family does not run."""
    device, _, family = kernel.partition("-")
    if family:
        if dtype not in FAMILY_DTYPES.get(family, (dtype,)):
            pytest.skip(f"the {family} kernel does not run {dtype}")
        if family == "sm90" and torch.cuda.get_device_capability() != (9, 0):
            pytest.skip("the sm90 kernel needs a compute capability 9.0 GPU")
        fa_overrides(family=family)
    else:
        fa_overrides(family="auto")
    return device


def reference(q, k, v, causal=False, scale=None):
    """SDPA's math backend on float64 copies: the exact answer for the rule."""
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal,
                                              scale=scale, enable_gqa=True)


def reference_lse(q, k, causal=False, scale=None):
    """log Σ_j exp(scale · q_i · k_j) over the keys row i sees, in float64."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    groups = q.shape[1] // k.shape[1]
    kk = k.double().repeat_interleave(groups, dim=1)
    s = (q.double() @ kk.transpose(-1, -2)) * scale
    if causal:
        nq, nk = s.shape[-2:]
        s = s.masked_fill(torch.ones(nq, nk, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.logsumexp(s, dim=-1)


def pytorch_same_dtype(q, k, v, causal=False, scale=None):
    """PyTorch's own SDPA in the inputs' dtype: the error our kernel is held to. Its default
    backend first; where that raises or returns non-finite values (seen on CUDA with torch 2.11:
    fp32 with d > 128 on unaligned rows, and scale <= 0), the math backend in the same dtype."""
    try:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)
    except RuntimeError:   # torch 2.11's CUDA efficient backend has no fp32 kernel for some d > 128 layouts
        out = None
    if out is None or not torch.isfinite(out).all():
        with sdpa_kernel(SDPBackend.MATH):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)
    return out


def assert_accurate(out, q, k, v, causal=False, scale=None, what=""):
    """Our error against the float64 reference must be <= 2 × PyTorch's + slack."""
    ref = reference(q, k, v, causal, scale)
    pt = pytorch_same_dtype(q, k, v, causal, scale)
    assert out.shape == ref.shape and out.dtype == q.dtype and out.device == q.device
    if out.numel() == 0:
        return
    assert torch.isfinite(out).all(), f"{what}: non-finite output"
    err = (out.double() - ref).abs().max().item()
    err_pt = (pt.double() - ref).abs().max().item()
    bound = 2 * err_pt + SLACK[q.dtype]
    assert err <= bound, f"{what}: our max error {err:.3e} > 2 × PyTorch's {err_pt:.3e} + slack = {bound:.3e}"


def randn(*shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, dtype=dtype, device=device)


def poison_scores(q, k):
    """Writes NaN and ±inf into q (B ≥ 2, Hq = 4) and k (Hkv = 2, Nk ≥ 3001) in place, one kind of
    non-finite score per row (every query i of it), and returns the (B, Hq) rows that SDPA makes NaN:
      (0, 0) NaN in q: every score NaN;          (1, 0) +inf in q: scores ±inf, inf − inf;
      (1, 2), (1, 3) key 100 of KV head 1 NaN;    (0, 1), (0, 3) a +inf score (k = +inf at keys 3000
      and 2000, q > 0 there): inf − inf;          (0, 2) a −inf score (q < 0 there): that key's weight
      is 0, a finite row;                         (1, 1) clean."""
    q[0, 0, :, 3] = float("nan")
    q[1, 0, :, 0] = float("inf")
    k[1, 1, 100, 5] = float("nan")
    k[0, 0, 3000, 7] = float("inf")
    k[0, 1, 2000, 7] = float("inf")
    q[0, 1, :, 7], q[0, 2, :, 7], q[0, 3, :, 7] = 1.0, -1.0, 1.0
    nan_rows = torch.ones(q.shape[0], 4, dtype=torch.bool)
    nan_rows[0, 2] = nan_rows[1, 1] = False
    nan_rows[2:] = False
    return nan_rows

