"""The attention variants: causal alignment, sliding windows, softcap, ALiBi, attention sinks, key
masks, SDPA's attn_mask, packed (varlen) sequences and the variants over a KV cache.

What is tested:
- variant_reference: an independent dense float64 reference written from the semantics (explicit
  score matrix, visibility mask, sink column, rows that see nothing give 0 and lse −inf), itself
  checked against PyTorch's SDPA wherever SDPA can express the case (test_reference_*);
- accuracy of attention / attention_lse for each variant alone and in combinations, over VKERNELS,
  fp32 / fp16 / bf16, Nq != Nk both ways, Nq = 1, d in {33, 40, 64, 128}, GQA and MQA, with
  FlashAttention's rule (assert_variant_accurate): our error against the float64 reference is at
  most 2 × PyTorch's own error plus conftest.SLACK. PyTorch's own error is that of pytorch_like:
  the same computation the way SDPA does it in the inputs' dtype (fp32 scores and softmax, P
  rounded to the inputs' dtype before P·V, output rounded), whose error matches SDPA's to within a
  few percent where SDPA can compute the case (test_reference_pytorch_like_is_sdpas_error);
- rows that see no key (window, key_mask, attn_mask): zeros and lse −inf; with a sink zeros and
  lse = sinks[h];
- attention_varlen (ragged, empty and Nq_b != Nk_b sequences) and attention_kvcache with variants;
- bad input: each malformed variant argument raises naming the argument;
- opcheck of the fa:: ops the public functions call (found by recording them) and
  torch.compile(fullgraph=True) of the public functions;
- CUDA graph capture of a key_mask call and a varlen call (gpu);
- a random profile of variant combinations (FA_VARIANT_CASES cases, default 40).
"""
import inspect
import math
import os
import random
import zlib

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

import torch_flashattn
from conftest import DEVICES, SLACK, pytorch_same_dtype, reference, reference_lse, use_kernel

NEG_INF = float("-inf")
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
LSE_SLACK = 1e-4   # absolute slack on lse over 2 × PyTorch's own lse error (test_forward: 1e-4)


# The CPU backend, CUDA's automatic choice (for fp16/bf16 the Hopper kernel on compute capability
# 9.0 and the sm_80 kernel for packed sequences and elsewhere; the exact path for fp32), the sm_80
# kernel forced, and the exact path itself on CUDA and on the CPU (torch_flashattn._testing.exact_path),
# so that code is checked where no GPU is too. The fp32 and SIMT families take no variants (their
# calls are the exact path's), so they are not listed again.
VKERNELS = DEVICES + [pytest.param(k, marks=pytest.mark.gpu) for k in ("cuda-sm80", "cuda-exact")] + ["cpu-exact"]
VDEVICES = DEVICES + ["cpu-exact"]


@pytest.fixture(autouse=True)
def _plain_path_after_each_test():
    yield
    torch.ops.fa._set_exact(False)


def use_vdevice(device):
    """A VDEVICES entry: its torch device ("cpu-exact", "cuda-exact": that device, on the exact path)."""
    if device.endswith("-exact"):
        torch.ops.fa._set_exact(True)
        return device.partition("-")[0]
    return device


def use_vkernel(kernel, dtype, fa_overrides):
    """use_kernel, plus "cpu-exact" and "cuda-exact" (the exact path until the test ends)."""
    if kernel.endswith("-exact"):
        torch.ops.fa._set_exact(True)
        return kernel.partition("-")[0]
    return use_kernel(kernel, dtype, fa_overrides)


# ---- the reference -----------------------------------------------------------------------------

def variant_reference(q, k, v, *, causal=False, scale=None, causal_align="top_left", window=(-1, -1),
                      softcap=None, alibi_slopes=None, sinks=None, key_mask=None, attn_mask=None,
                      compute=torch.float64, p_dtype=None):
    """Dense attention with every variant, from the semantics: returns (out, lse) in `compute`.
    q (B, Hq, Nq, d), k / v (B, Hkv, Nk, d). p_dtype: round the softmax numerators P to it before
    P·V (what PyTorch's SDPA does in fp16 / bf16); the denominator keeps them unrounded."""
    B, Hq, Nq, d = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    dev = q.device
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    groups = Hq // Hkv if Hkv else 1
    kk = k.to(compute).repeat_interleave(groups, dim=1)
    vv = v.to(compute).repeat_interleave(groups, dim=1)
    s = (q.to(compute) @ kk.transpose(-1, -2)) * scale                       # (B, Hq, Nq, Nk)
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    delta = {"top_left": 0, "bottom_right": Nk - Nq}[causal_align]
    rel = torch.arange(Nq, device=dev)[:, None] + delta - torch.arange(Nk, device=dev)[None, :]   # i + δ − j
    if alibi_slopes is not None:
        slopes = alibi_slopes.to(compute).reshape((1, Hq) if alibi_slopes.dim() == 1 else (B, Hq))
        s = s - slopes[..., None, None] * rel.abs().to(compute)
    visible = variant_visible(B, Hq, Nq, Nk, dev, causal=causal, causal_align=causal_align, window=window,
                              key_mask=key_mask, attn_mask=attn_mask)
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        s = s + attn_mask.to(compute)
    s = s.masked_fill(~visible, NEG_INF)
    m = s.amax(-1, keepdim=True) if Nk else torch.full((B, Hq, Nq, 1), NEG_INF, dtype=compute, device=dev)
    if sinks is not None:
        sink = sinks.to(compute).reshape(1, Hq, 1, 1).expand(B, Hq, Nq, 1)
        m = torch.maximum(m, sink)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))   # rows that see nothing: any finite shift
    p = torch.exp(s - m)
    denom = p.sum(-1, keepdim=True)
    if sinks is not None:
        denom = denom + torch.exp(sink - m)
    if p_dtype is not None:
        p = p.to(p_dtype).to(compute)
    # Rows that see nothing: 0 and lse = −inf, divided and logged through a safe denominator so that
    # autograd through this reference (test_backward) gives them zero gradients, not NaN.
    sees = denom > 0
    safe = torch.where(sees, denom, torch.ones((), dtype=compute, device=dev))
    out = torch.where(sees, (p @ vv) / safe, torch.zeros((), dtype=compute, device=dev))
    lse = torch.where(sees, torch.log(safe) + m, torch.full((), NEG_INF, dtype=compute, device=dev)).squeeze(-1)
    return out, lse


def variant_visible(B, Hq, Nq, Nk, device, *, causal=False, causal_align="top_left", window=(-1, -1),
                    key_mask=None, attn_mask=None):
    """Which keys each query sees, (B, Hq, Nq, Nk) bool, from the semantics: the window and causal
    about δ, key_mask, and attn_mask (bool: True takes part; float: −inf hides the key)."""
    delta = {"top_left": 0, "bottom_right": Nk - Nq}[causal_align]
    rel = torch.arange(Nq, device=device)[:, None] + delta - torch.arange(Nk, device=device)[None, :]   # i + δ − j
    left, right = window
    if causal:
        right = 0
    visible = torch.ones(B, Hq, Nq, Nk, dtype=torch.bool, device=device)
    if left >= 0:
        visible &= rel <= left          # j >= i + δ − left
    if right >= 0:
        visible &= rel >= -right        # j <= i + δ + right
    if key_mask is not None:
        visible &= (key_mask != 0)[:, None, None, :]
    if attn_mask is not None:
        visible &= attn_mask if attn_mask.dtype == torch.bool else attn_mask != NEG_INF
    return visible


def pytorch_like(q, k, v, **variants):
    """The reference computed as PyTorch's SDPA computes in q's dtype: (out in q's dtype, fp32 lse)."""
    low = None if q.dtype == torch.float32 else q.dtype
    out, lse = variant_reference(q, k, v, **variants, compute=torch.float32, p_dtype=low)
    return out.to(q.dtype), lse


def exact(q, k, v, **variants):
    """The float64 reference on the CPU."""
    cpu = tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, variants)
    return variant_reference(q.cpu(), k.cpu(), v.cpu(), **cpu)


def assert_rule(out, ref, pt, dtype, what):
    """out, pt (PyTorch's) against ref (float64): FlashAttention's rule; rows of ref that are
    exactly 0 because they see nothing are handled by the callers."""
    assert torch.isfinite(out).all(), f"{what}: non-finite output"
    if out.numel() == 0:
        return
    err = (out.double().cpu() - ref).abs().max().item()
    err_pt = (pt.double().cpu() - ref).abs().max().item()
    bound = 2 * err_pt + SLACK[dtype]
    assert err <= bound, f"{what}: our max error {err:.3e} > 2 × PyTorch's {err_pt:.3e} + slack = {bound:.3e}"


def assert_lse(lse, ref_lse, pt_lse, what):
    """−inf exactly where the reference has it; elsewhere 2 × PyTorch's error + LSE_SLACK."""
    lse, pt_lse = lse.cpu(), pt_lse.cpu()
    empty = ref_lse == NEG_INF
    assert torch.equal(lse == NEG_INF, empty), f"{what}: lse is −inf in other rows than the reference"
    fin = ~empty
    if fin.any():
        assert torch.isfinite(lse[fin]).all(), f"{what}: non-finite lse where the reference is finite"
        err = (lse.double()[fin] - ref_lse[fin]).abs().max().item()
        err_pt = (pt_lse.double()[fin] - ref_lse[fin]).abs().max().item()
        bound = 2 * err_pt + LSE_SLACK
        assert err <= bound, f"{what}: lse max error {err:.3e} > 2 × PyTorch's {err_pt:.3e} + {LSE_SLACK}"


def assert_variant_accurate(out, lse, q, k, v, what="", **variants):
    """attention(_lse)'s result for q, k, v and the variants, by FlashAttention's rule; rows that
    see no key must be exactly 0. lse may be None (attention alone)."""
    ref, ref_lse = exact(q, k, v, **variants)
    pt, pt_lse = pytorch_like(q, k, v, **variants)
    assert out.shape == q.shape and out.dtype == q.dtype and out.device == q.device, what
    empty = ref_lse == NEG_INF
    assert (out.cpu()[empty] == 0).all(), f"{what}: a row that sees no key is not 0"
    assert_rule(out, ref, pt, q.dtype, what)
    if lse is not None:
        assert lse.shape == q.shape[:3] and lse.dtype == torch.float32 and lse.device == q.device, what
        assert_lse(lse, ref_lse, pt_lse, what)


# ---- inputs --------------------------------------------------------------------------------------

def rand(g, *shape, dtype=torch.float32, device="cpu"):
    """Seeded normal values drawn on the CPU (the same on every device)."""
    return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)


def make_qkv(g, B, Hq, Hkv, Nq, Nk, d, dtype, device, layout="contiguous"):
    if layout == "bnhd":   # (B, N, H, d) storage seen as (B, H, N, d)
        return (rand(g, B, Nq, Hq, d, dtype=dtype, device=device).transpose(1, 2),
                rand(g, B, Nk, Hkv, d, dtype=dtype, device=device).transpose(1, 2),
                rand(g, B, Nk, Hkv, d, dtype=dtype, device=device).transpose(1, 2))
    return (rand(g, B, Hq, Nq, d, dtype=dtype, device=device), rand(g, B, Hkv, Nk, d, dtype=dtype, device=device),
            rand(g, B, Hkv, Nk, d, dtype=dtype, device=device))


def alibi_heads(Hq, device="cpu"):
    """The ALiBi paper's slopes 2^(−8 (h + 1) / Hq)."""
    return torch.tensor([2 ** (-8 * (h + 1) / Hq) for h in range(Hq)], dtype=torch.float32, device=device)


def bernoulli(g, p, *shape, device="cpu"):
    return (torch.rand(*shape, generator=g) < p).to(device)


def int_key_mask(g, B, Nk, device):
    """int32 key mask with values 0, 1, 2, −7: every nonzero value takes part."""
    vals = torch.tensor([0, 1, 2, -7], dtype=torch.int32)
    return vals[torch.randint(0, 4, (B, Nk), generator=g)].to(device)


def variant_kwargs(name, g, B, Hq, Nq, Nk, dtype, device):
    """The keyword arguments of one named variant case."""
    def fmask(*shape, mdtype=torch.float32):
        return rand(g, *shape, dtype=mdtype, device=device)

    cases = {
        "causal_top_left": lambda: dict(causal=True),
        "causal_bottom_right": lambda: dict(causal=True, causal_align="bottom_right"),
        "window": lambda: dict(window=(16, 8)),
        "window_bottom_right": lambda: dict(window=(16, 8), causal_align="bottom_right"),
        "window_left_causal": lambda: dict(window=(24, -1), causal=True),
        "window_left_causal_bottom_right": lambda: dict(window=(24, -1), causal=True, causal_align="bottom_right"),
        "window_right_only": lambda: dict(window=(-1, 3)),
        "window_diagonal": lambda: dict(window=(0, 0), causal_align="bottom_right"),
        "softcap": lambda: dict(softcap=1.0),
        "softcap_causal": lambda: dict(softcap=5.0, causal=True, scale=0.4),
        "alibi_heads_causal": lambda: dict(alibi_slopes=alibi_heads(Hq, device), causal=True),
        "alibi_batch_bottom_right": lambda: dict(
            alibi_slopes=(torch.rand(B, Hq, generator=g) * 0.3).to(device), causal_align="bottom_right"),
        "sinks": lambda: dict(sinks=(rand(g, Hq) * 1.5).to(device)),
        "sinks_causal_window": lambda: dict(sinks=(rand(g, Hq) + 2).to(device), causal=True, window=(10, -1)),
        "key_mask_bool": lambda: dict(key_mask=bernoulli(g, 0.75, B, Nk, device=device)),
        "key_mask_int": lambda: dict(key_mask=int_key_mask(g, B, Nk, device)),
        "attn_mask_bool_11QK": lambda: dict(attn_mask=bernoulli(g, 0.8, 1, 1, Nq, Nk, device=device)),
        "attn_mask_bool_full": lambda: dict(attn_mask=bernoulli(g, 0.7, B, Hq, Nq, Nk, device=device)),
        "attn_mask_float_B11K": lambda: dict(attn_mask=fmask(B, 1, 1, Nk)),
        "attn_mask_t5_bias_qdtype": lambda: dict(attn_mask=fmask(1, Hq, Nq, Nk, mdtype=dtype)),
        "attn_mask_float_transposed": lambda: dict(attn_mask=transposed_mask(g, Nq, Nk, device)),
        "attn_mask_and_key_mask": lambda: dict(attn_mask=fmask(B, 1, Nq, Nk),
                                               key_mask=bernoulli(g, 0.8, B, Nk, device=device)),
        "combo_window_softcap_sinks_key_mask": lambda: dict(
            window=(20, 4), softcap=3.0, sinks=rand(g, Hq).to(device),
            key_mask=bernoulli(g, 0.7, B, Nk, device=device)),
        "combo_alibi_window_sinks_bottom_right": lambda: dict(
            alibi_slopes=(torch.rand(B, Hq, generator=g) * 0.2).to(device), window=(32, -1), causal=True,
            causal_align="bottom_right", sinks=rand(g, Hq).to(device)),
        "combo_all": lambda: dict(
            causal=True, causal_align="bottom_right", window=(40, -1), softcap=4.0,
            alibi_slopes=alibi_heads(Hq, device),
            sinks=rand(g, Hq).to(device), key_mask=int_key_mask(g, B, Nk, device), attn_mask=fmask(B, 1, Nq, Nk)),
    }
    return cases[name]()


def transposed_mask(g, Nq, Nk, device):
    """A float (Nq, Nk) mask that is the transpose of an (Nk, Nq) buffer (not contiguous), with
    some −inf entries."""
    m = torch.randn(Nk, Nq, generator=g)
    m[torch.rand(Nk, Nq, generator=g) < 0.1] = NEG_INF
    m = m.to(device).t()
    assert not m.is_contiguous() or min(Nq, Nk) == 1
    return m


VARIANT_CASES = ["causal_top_left", "causal_bottom_right", "window", "window_bottom_right", "window_left_causal",
                 "window_left_causal_bottom_right", "window_right_only", "window_diagonal", "softcap",
                 "softcap_causal", "alibi_heads_causal", "alibi_batch_bottom_right", "sinks", "sinks_causal_window",
                 "key_mask_bool", "key_mask_int", "attn_mask_bool_11QK", "attn_mask_bool_full", "attn_mask_float_B11K",
                 "attn_mask_t5_bias_qdtype", "attn_mask_float_transposed", "attn_mask_and_key_mask",
                 "combo_window_softcap_sinks_key_mask", "combo_alibi_window_sinks_bottom_right", "combo_all"]
# (B, Hq, Hkv, Nq, Nk, d): Nq < Nk and Nq > Nk with GQA / MQA, a single query, an odd head dim; a
# few queries per head with GQA (the CPU backend puts the query heads of one kv head in one block:
# 4 heads of 3 rows, 12 + 4 heads of 5 rows, and 2 heads of 2 rows, a block narrow enough for its
# dot-product path, as the single query above is).
SHAPES = [(2, 4, 2, 97, 130, 64), (1, 4, 1, 130, 97, 128), (2, 3, 3, 1, 150, 40), (1, 6, 2, 45, 45, 33),
          (2, 8, 2, 3, 77, 64), (1, 16, 1, 5, 40, 16), (2, 4, 2, 2, 70, 64)]


def seed_of(*parts):
    """A seed for a parametrized case, the same in every process (unlike hash())."""
    return zlib.crc32(repr(parts).encode())


def describe(variants):
    return ", ".join(f"{k}={tuple(v.shape) if isinstance(v, torch.Tensor) else v}" for k, v in variants.items())


# ---- the reference against SDPA ----------------------------------------------------------------

def sdpa64(q, k, v, **kw):
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q.double(), k.double(), v.double(), enable_gqa=True, **kw)


def ref_qkv(seed, B=2, Hq=4, Hkv=2, Nq=23, Nk=31, d=16, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return make_qkv(g, B, Hq, Hkv, Nq, Nk, d, dtype, "cpu")


@pytest.mark.parametrize("nq,nk", [(23, 31), (31, 23), (1, 9), (9, 9)])
@pytest.mark.parametrize("causal", [False, True])
def test_reference_plain_is_sdpa(nq, nk, causal):
    q, k, v = ref_qkv(0, Nq=nq, Nk=nk)
    out, lse = variant_reference(q, k, v, causal=causal, scale=0.3)
    torch.testing.assert_close(out, sdpa64(q, k, v, is_causal=causal, scale=0.3), atol=1e-12, rtol=0)
    torch.testing.assert_close(lse, reference_lse(q, k, causal, scale=0.3), atol=1e-12, rtol=0)


@pytest.mark.parametrize("shape", [(1, 1, 23, 31), (2, 1, 1, 31), (1, 4, 23, 31), (2, 4, 23, 31), (23, 31)])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_reference_attn_mask_is_sdpa(shape, kind):
    """Broadcast masks, fully masked rows included (SDPA's math backend gives them 0)."""
    q, k, v = ref_qkv(1)
    g = torch.Generator().manual_seed(2)
    if kind == "bool":
        mask = torch.rand(*shape, generator=g) < 0.6
        if shape[-2] > 1:
            mask[..., 3, :] = False      # a row that sees nothing
    else:
        mask = torch.randn(*shape, generator=g, dtype=torch.float64)
        mask[torch.rand(*shape, generator=g) < 0.2] = NEG_INF
    out, _ = variant_reference(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, sdpa64(q, k, v, attn_mask=mask), atol=1e-12, rtol=0)
    mask_t = mask.transpose(-1, -2).contiguous().transpose(-1, -2)   # same values, other strides
    torch.testing.assert_close(variant_reference(q, k, v, attn_mask=mask_t)[0], out, atol=0, rtol=0)


@pytest.mark.filterwarnings("ignore:Lower right causal bias")
@pytest.mark.parametrize("nq,nk", [(23, 31), (31, 23), (1, 9)])
def test_reference_bottom_right_and_key_mask_are_sdpa(nq, nk):
    q, k, v = ref_qkv(3, Nq=nq, Nk=nk)
    out, _ = variant_reference(q, k, v, causal=True, causal_align="bottom_right")
    expected = sdpa64(q, k, v, attn_mask=causal_lower_right(nq, nk))
    rows = torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq).any(-1)   # rows that see a key; the others 0
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=0)
    assert (out[:, :, ~rows] == 0).all()
    km = torch.rand(2, nk, generator=torch.Generator().manual_seed(4)) < 0.5
    km[1] = False
    out, lse = variant_reference(q, k, v, key_mask=km.int())
    torch.testing.assert_close(out, sdpa64(q, k, v, attn_mask=km[:, None, None, :]), atol=1e-12, rtol=0)
    assert (lse[1] == NEG_INF).all() and (out[1] == 0).all()


def loop_bias(B, Hq, nq, nk, delta, left, right, slopes):
    """The window and ALiBi as an SDPA float mask, one (i, j) at a time."""
    bias = torch.zeros(B, Hq, nq, nk, dtype=torch.float64)
    for b in range(B):
        for h in range(Hq):
            for i in range(nq):
                for j in range(nk):
                    if (left >= 0 and j < i + delta - left) or (right >= 0 and j > i + delta + right):
                        bias[b, h, i, j] = NEG_INF
                    elif slopes is not None:
                        bias[b, h, i, j] = -float(slopes[b, h]) * abs(i + delta - j)
    return bias


@pytest.mark.parametrize("align", ["top_left", "bottom_right"])
@pytest.mark.parametrize("window", [(3, 2), (0, 0), (-1, 1), (5, -1)])
@pytest.mark.parametrize("alibi", [None, "heads", "batch"])
def test_reference_window_alibi_is_sdpa(align, window, alibi):
    q, k, v = ref_qkv(5, Nq=11, Nk=14)
    slopes = {None: None, "heads": alibi_heads(4), "batch": torch.rand(2, 4) * 0.5}[alibi]
    out, lse = variant_reference(q, k, v, causal_align=align, window=window, alibi_slopes=slopes)
    delta = 0 if align == "top_left" else 14 - 11
    full = None if slopes is None else (slopes.expand(2, 4) if slopes.dim() == 1 else slopes)
    bias = loop_bias(2, 4, 11, 14, delta, *window, full)
    torch.testing.assert_close(out, sdpa64(q, k, v, attn_mask=bias), atol=1e-12, rtol=0)
    kk = k.repeat_interleave(2, dim=1)
    torch.testing.assert_close(lse, torch.logsumexp(q @ kk.transpose(-1, -2) / 4 + bias, dim=-1), atol=1e-12, rtol=0)


def test_reference_sinks_is_sdpa_with_a_zero_key():
    """A sink is one more key with score sinks[h] and value 0."""
    q, k, v = ref_qkv(6)
    sinks = torch.tensor([0.5, -1.0, 3.0, 8.0])
    out, lse = variant_reference(q, k, v, sinks=sinks, causal=True)
    k0 = torch.cat([k, torch.zeros(2, 2, 1, 16, dtype=k.dtype)], dim=2)
    v0 = torch.cat([v, torch.zeros(2, 2, 1, 16, dtype=v.dtype)], dim=2)
    bias = torch.zeros(2, 4, 23, 32, dtype=torch.float64)
    bias[..., :31] = torch.zeros(23, 31).masked_fill(torch.ones(23, 31, dtype=torch.bool).triu(1), NEG_INF)
    bias[..., 31] = sinks.double()[:, None]
    torch.testing.assert_close(out, sdpa64(q, k0, v0, attn_mask=bias), atol=1e-12, rtol=0)
    kk = k0.repeat_interleave(2, dim=1)
    torch.testing.assert_close(lse, torch.logsumexp(q @ kk.transpose(-1, -2) / 4 + bias, dim=-1), atol=1e-12, rtol=0)


def test_reference_softcap_is_sdpa_over_capped_scores():
    """SDPA over queries that are the capped score rows and keys that are the identity."""
    q, k, v = ref_qkv(7, Hkv=4)
    q = q * 3
    mask = torch.randn(23, 31, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    out, lse = variant_reference(q, k, v, softcap=2.0, attn_mask=mask)
    capped = 2.0 * torch.tanh((q @ k.transpose(-1, -2)) / 4 / 2.0)
    eye = torch.eye(31, dtype=torch.float64).expand(2, 4, 31, 31)
    torch.testing.assert_close(out, sdpa64(capped, eye, v, attn_mask=mask, scale=1.0), atol=1e-12, rtol=0)
    torch.testing.assert_close(lse, torch.logsumexp(capped + mask, dim=-1), atol=1e-12, rtol=0)


def test_reference_empty_rows():
    """No key visible: 0 and lse −inf; with a sink 0 and lse = sinks[h]; Nk = 0 too."""
    q, k, v = ref_qkv(8, Nq=5, Nk=0)
    out, lse = variant_reference(q, k, v)
    assert (out == 0).all() and (lse == NEG_INF).all()
    sinks = torch.tensor([0.5, -1.0, 3.0, 8.0])
    out, lse = variant_reference(q, k, v, sinks=sinks)
    assert (out == 0).all() and torch.allclose(lse, sinks.double()[None, :, None].expand(2, 4, 5), atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("nq,nk,d,causal,mask", [(97, 130, 64, False, False), (130, 97, 128, True, False),
                                                 (1, 150, 40, False, False), (45, 45, 33, True, False),
                                                 (200, 200, 64, False, True)])
def test_reference_pytorch_like_is_sdpas_error(dtype, nq, nk, d, causal, mask):
    """The rule's PyTorch error term: pytorch_like's error is SDPA's own (CPU, same dtype) to within
    a factor 1.5 either way, so the bound is neither looser nor tighter than conftest's."""
    torch.manual_seed(nq + d)
    q = torch.randn(2, 4, nq, d, dtype=dtype)
    k, v = torch.randn(2, 2, nk, d, dtype=dtype), torch.randn(2, 2, nk, d, dtype=dtype)
    am = (torch.rand(nq, nk) < 0.7) if mask else None
    ref = sdpa64(q, k, v, is_causal=causal, attn_mask=am)
    if mask:
        sd = F.scaled_dot_product_attention(q, k, v, attn_mask=am, enable_gqa=True)
    else:
        sd = pytorch_same_dtype(q, k, v, causal)
        torch.testing.assert_close(ref, reference(q, k, v, causal), atol=0, rtol=0)
    pt, _ = pytorch_like(q, k, v, causal=causal, attn_mask=am)
    e_pt = (pt.double() - ref).abs().max().item()
    e_sd = (sd.double() - ref).abs().max().item()
    assert e_sd / 1.5 <= e_pt <= 1.5 * e_sd, (e_pt, e_sd)


# ---- attention / attention_lse accuracy ------------------------------------------------------

@pytest.mark.parametrize("kernel", VKERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B{}-H{}-{}-Nq{}-Nk{}-d{}".format(*s))
@pytest.mark.parametrize("case", VARIANT_CASES)
def test_variant_accuracy(kernel, dtype, shape, case, fa_overrides):
    device = use_vkernel(kernel, dtype, fa_overrides)
    B, Hq, Hkv, Nq, Nk, d = shape
    g = torch.Generator().manual_seed(seed_of(case, shape))
    q, k, v = make_qkv(g, B, Hq, Hkv, Nq, Nk, d, dtype, device)
    variants = variant_kwargs(case, g, B, Hq, Nq, Nk, dtype, device)
    what = f"{case} {dtype} {shape}: {describe(variants)}"
    out, lse = torch_flashattn.attention_lse(q, k, v, **variants)
    assert_variant_accurate(out, lse, q, k, v, what=what, **variants)
    # attention and attention_lse run the same computation.
    assert torch.equal(out, torch_flashattn.attention(q, k, v, **variants)), what


# The C backend's 8- and 16-float forms, forced in turn on whatever CPU runs the tests (fa_overrides
# .cpu_lanes): the same bits in the output, lse and the gradients. The shapes give the micro-kernel
# key blocks at each row count mod 6 (the 8-float form's 6-row blocks, its last rows 4 at a time:
# 70 keys end in a block of 8 rows, 77 in 16, 200 in 8 and 64 in 64), narrow blocks whose rows are
# not a whole number of 4 vectors (d = 16, 40, 80: 2, 6 and 10 vectors of 8 floats), GQA decoding
# steps, and the softcap's tanh.
LANE_SHAPES = [(1, 2, 1, 70, 70, 64), (2, 4, 2, 3, 77, 40), (1, 8, 2, 1, 130, 80), (1, 16, 1, 5, 40, 16),
               (1, 2, 2, 33, 200, 96)]


@pytest.mark.parametrize("shape", LANE_SHAPES, ids=lambda s: "B{}-H{}-{}-Nq{}-Nk{}-d{}".format(*s))
@pytest.mark.parametrize("case", ["causal_top_left", "softcap_causal", "combo_window_softcap_sinks_key_mask"])
def test_cpu_lane_widths_give_the_same_bits(shape, case, fa_overrides):
    B, Hq, Hkv, Nq, Nk, d = shape
    g = torch.Generator().manual_seed(seed_of("lanes", case, shape))
    q, k, v = make_qkv(g, B, Hq, Hkv, Nq, Nk, d, torch.float32, "cpu")
    variants = variant_kwargs(case, g, B, Hq, Nq, Nk, torch.float32, "cpu")
    dout = rand(g, *q.shape)
    what = f"{case} {shape}: {describe(variants)}"
    runs = []
    for lanes in ("8", "16"):
        fa_overrides(cpu_lanes=lanes)
        qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
        out, lse = torch_flashattn.attention_lse(qg, kg, vg, **variants)
        assert_variant_accurate(out.detach(), lse.detach(), q, k, v, what=f"{lanes} floats, {what}", **variants)
        out.backward(dout)
        runs.append((out.detach(), lse.detach(), qg.grad, kg.grad, vg.grad))
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), *runs):
        assert torch.equal(a, b), f"{name} differs between the 8- and 16-float forms: {what}"


@pytest.mark.parametrize("kernel", VKERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_variants_compose_over_strided_views(kernel, dtype, fa_overrides):
    """Every variant at once on (B, N, H, d) views, an expanded GQA attn_mask of another stride
    pattern, and key_mask / slopes / sinks that are strided views themselves."""
    device = use_vkernel(kernel, dtype, fa_overrides)
    g = torch.Generator().manual_seed(11)
    B, Hq, Hkv, Nq, Nk, d = 2, 6, 2, 70, 90, 64
    q, k, v = make_qkv(g, B, Hq, Hkv, Nq, Nk, d, dtype, device, layout="bnhd")
    assert not q.is_contiguous()
    variants = dict(causal=True, causal_align="bottom_right", window=(30, -1), softcap=6.0, scale=0.2,
                    alibi_slopes=(torch.rand(B, 2 * Hq, generator=g) * 0.1).to(device)[:, ::2],
                    sinks=rand(g, 3 * Hq, device=device)[1::3],
                    key_mask=bernoulli(g, 0.8, B, 2 * Nk, device=device)[:, ::2],
                    attn_mask=rand(g, B, 1, Nk, Nq, device=device).transpose(-1, -2).expand(B, Hq, Nq, Nk))
    for name in ("alibi_slopes", "sinks", "key_mask", "attn_mask"):
        assert not variants[name].is_contiguous(), name
    out, lse = torch_flashattn.attention_lse(q, k, v, **variants)
    assert_variant_accurate(out, lse, q, k, v, what="strided views", **variants)


@pytest.mark.parametrize("kernel", VKERNELS)
def test_key_mask_column_slice_is_not_copied(kernel, fa_overrides):
    """A bool key_mask that is a column slice of a longer padding mask (rows at a larger stride, as
    the transformers backend hands a cache's keys) is read in place by the kernels (the exact path
    computes on its own copies), with the slice's result."""
    dtype = torch.float32 if kernel == "cpu" else torch.bfloat16
    device = use_vkernel(kernel, dtype, fa_overrides)
    g = torch.Generator().manual_seed(12)
    B, Hq, Hkv, Nk, d = 3, 4, 2, 75, 32
    for nq in (1, 9):
        q, k, v = make_qkv(g, B, Hq, Hkv, nq, Nk, d, dtype, device)
        key_mask = bernoulli(g, 0.7, B, Nk + 20, device=device)[:, 13:13 + Nk]
        assert key_mask.stride() == (Nk + 20, 1)
        kw = dict(causal=True, causal_align="bottom_right", key_mask=key_mask)
        with torch.profiler.profile() as prof:
            out = torch_flashattn.attention(q, k, v, **kw)
        copies = [e.name for e in prof.events() if e.name in ("aten::copy_", "aten::clone", "aten::contiguous")]
        assert kernel.endswith("-exact") or copies == [], f"nq={nq}: key_mask copied ({copies})"
        assert torch.equal(out, torch_flashattn.attention(q, k, v, **{**kw, "key_mask": key_mask.contiguous()}))
        assert_variant_accurate(out, None, q, k, v, what=f"key_mask slice nq={nq}", **kw)


@pytest.mark.parametrize("kernel", VKERNELS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mask_dtype", ["q", "fp32"])
def test_attn_mask_dtype(kernel, dtype, mask_dtype, fa_overrides):
    """A float attn_mask of q's dtype or float32 is added as it is (large values included)."""
    device = use_vkernel(kernel, dtype, fa_overrides)
    g = torch.Generator().manual_seed(12)
    q, k, v = make_qkv(g, 2, 4, 2, 40, 50, 64, dtype, device)
    mask = rand(g, 2, 4, 40, 50, device=device) * 8
    mask = mask.to(dtype) if mask_dtype == "q" else mask
    out, lse = torch_flashattn.attention_lse(q, k, v, attn_mask=mask)
    assert_variant_accurate(out, lse, q, k, v, what=f"mask {mask.dtype}", attn_mask=mask)


@pytest.mark.parametrize("kernel", VKERNELS)
def test_explicit_defaults_are_plain_attention(kernel, fa_overrides):
    device = use_vkernel(kernel, torch.float32, fa_overrides)
    g = torch.Generator().manual_seed(13)
    q, k, v = make_qkv(g, 2, 4, 2, 33, 47, 64, torch.float32, device)
    for causal in (False, True):
        plain = torch_flashattn.attention_lse(q, k, v, causal=causal)
        explicit = torch_flashattn.attention_lse(q, k, v, causal=causal, causal_align="top_left", window=(-1, -1),
                                                 softcap=None, alibi_slopes=None, sinks=None, key_mask=None,
                                                 attn_mask=None)
        for a, b in zip(plain, explicit):
            torch.testing.assert_close(a, b, atol=2e-6, rtol=0)


@pytest.mark.parametrize("kernel", VKERNELS)
def test_variants_change_the_result(kernel, fa_overrides):
    """Each variant argument is honoured: the output differs from plain attention's (guards
    against an argument silently dropped on the way to the kernel)."""
    device = use_vkernel(kernel, torch.float32, fa_overrides)
    g = torch.Generator().manual_seed(14)
    B, Hq, Nq, Nk = 2, 4, 40, 60
    q, k, v = make_qkv(g, B, Hq, 2, Nq, Nk, 64, torch.float32, device)
    plain = torch_flashattn.attention(q, k, v)
    for variants in (dict(causal=True), dict(causal=True, causal_align="bottom_right"), dict(window=(5, -1)),
                     dict(window=(-1, 5)), dict(softcap=0.5), dict(alibi_slopes=alibi_heads(Hq, device)),
                     dict(sinks=torch.full((Hq,), 3.0, device=device)),
                     dict(key_mask=bernoulli(g, 0.5, B, Nk, device=device)),
                     dict(attn_mask=rand(g, Nq, Nk, device=device) * 3)):
        out = torch_flashattn.attention(q, k, v, **variants)
        assert (out - plain).abs().max().item() > 1e-2, describe(variants)


# ---- rows that see no key --------------------------------------------------------------------

def empty_row_cases(g, B, Hq, Nq, Nk, device):
    """(name, variants, rows that see nothing as a (B, Hq, Nq) bool)."""
    rows = torch.zeros(B, Hq, Nq, dtype=torch.bool)
    win = rows.clone()
    win[:, :, Nk + 1:] = True                       # top-left (1, 1): row i sees keys i − 1 .. i + 1
    br = rows.clone()
    br[:, :, :Nq - Nk] = True                       # bottom-right causal with Nq > Nk
    km = bernoulli(g, 0.7, B, Nk, device=device)
    km[1] = False
    kmr = rows.clone()
    kmr[1] = True
    am = bernoulli(g, 0.8, B, 1, Nq, Nk)
    am[0, 0, 3] = False
    am[1, 0, Nq - 1] = False
    amr = rows.clone()
    amr[0, :, 3] = True
    amr[1, :, Nq - 1] = True
    fm = torch.randn(1, Hq, Nq, Nk, generator=g)
    fm[0, 1, 5:9] = NEG_INF
    fmr = rows.clone()
    fmr[:, 1, 5:9] = True
    return [("window", dict(window=(1, 1)), win),
            ("causal_bottom_right", dict(causal=True, causal_align="bottom_right"), br),
            ("key_mask", dict(key_mask=km), kmr),
            ("attn_mask_bool", dict(attn_mask=am.to(device)), amr),
            ("attn_mask_float_-inf", dict(attn_mask=fm.to(device)), fmr)]


@pytest.mark.parametrize("kernel", VKERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("with_sinks", [False, True], ids=["no_sink", "sink"])
def test_rows_that_see_nothing(kernel, dtype, with_sinks, fa_overrides):
    device = use_vkernel(kernel, dtype, fa_overrides)
    g = torch.Generator().manual_seed(15)
    B, Hq, Nq, Nk, d = 2, 4, 40, 20, 64
    q, k, v = make_qkv(g, B, Hq, 2, Nq, Nk, d, dtype, device)
    sinks = torch.tensor([0.5, -2.0, 1.0, 4.0], device=device) if with_sinks else None
    for name, variants, rows in empty_row_cases(g, B, Hq, Nq, Nk, device):
        if with_sinks:
            variants = dict(variants, sinks=sinks)
        out, lse = torch_flashattn.attention_lse(q, k, v, **variants)
        out, lse = out.cpu(), lse.cpu()
        assert rows.any() and not rows.all(), name
        assert (out[rows] == 0).all(), f"{name}: rows that see no key are not 0"
        if with_sinks:
            expect = sinks.cpu()[None, :, None].expand(B, Hq, Nq)[rows]
            torch.testing.assert_close(lse[rows], expect, atol=1e-5, rtol=0, msg=f"{name}: lse is not the sink")
        else:
            assert (lse[rows] == NEG_INF).all(), f"{name}: lse of rows that see no key is not −inf"
        assert_variant_accurate(out.to(device), lse.to(device), q, k, v, what=name, **variants)


@pytest.mark.parametrize("kernel", VKERNELS)
def test_a_sink_of_minus_inf_is_no_sink(kernel, fa_overrides):
    """sinks[h] = −inf adds exp(−inf) = 0: the call without sinks, rows that see no key included
    (0 and lse −inf; their lse was NaN, and so were the gradients), and a zero sinks gradient."""
    dtype = torch.float16 if kernel.startswith("cuda") else torch.float32
    device = use_vkernel(kernel, dtype, fa_overrides)
    g = torch.Generator().manual_seed(22)
    q, k, v = (t.requires_grad_() for t in make_qkv(g, 2, 4, 2, 40, 20, 64, dtype, device))
    sinks = torch.tensor([float("-inf"), 0.5, float("-inf"), -1.0], device=device, requires_grad=True)
    kw = dict(causal=True, causal_align="bottom_right")          # rows 0..19 see no key
    runs = []
    for s in (torch.full((4,), float("-inf"), device=device, requires_grad=True), None, sinks):
        out, lse = torch_flashattn.attention_lse(q, k, v, sinks=s, **kw)
        grads = torch.autograd.grad(out.float().sum() + lse[:, :, 20:].sum(), (q, k, v) + ((s,) if s is not None else ()))
        runs.append((out, lse, grads))
    (out, lse, grads), (out0, lse0, grads0), (out2, lse2, grads2) = runs
    assert (out[:, :, :20] == 0).all() and (lse[:, :, :20] == NEG_INF).all()
    tol = dict(atol=1e-5 if dtype == torch.float32 else 2e-3, rtol=0)
    torch.testing.assert_close(out, out0, **tol)
    torch.testing.assert_close(lse, lse0, atol=1e-5, rtol=0)
    for a, b in zip(grads[:3], grads0):
        assert a.isfinite().all()
        torch.testing.assert_close(a, b, **tol)
    assert (grads[3] == 0).all()
    # Mixed: the −inf heads as without a sink, the others' lse of empty rows their sink.
    assert (lse2[:, 0, :20] == NEG_INF).all() and (lse2[:, 2, :20] == NEG_INF).all()
    torch.testing.assert_close(lse2[:, 1, :20], torch.full_like(lse2[:, 1, :20], 0.5))
    assert all(t.isfinite().all() for t in grads2) and grads2[3][0] == 0 and grads2[3][2] == 0


@pytest.mark.parametrize("device", VDEVICES)
@pytest.mark.parametrize("align", ["top_left", "bottom_right"])
def test_window_sides_near_int64_max(device, align):
    """Window sides up to 2^63 − 1 reach every key: the call without a window (the exact path's
    i + δ − side wrapped past int64 and hid keys)."""
    device = use_vdevice(device)
    g = torch.Generator().manual_seed(23)
    q, k, v = make_qkv(g, 1, 2, 2, 6, 3, 16, torch.float32, device)
    big = 2 ** 63 - 1
    for causal in (False, True):
        want, want_lse = torch_flashattn.attention_lse(q, k, v, causal=causal, causal_align=align)
        for window in ((big, big), (big, -1), (-1, big), (2 ** 62, 2 ** 62 + 5)):
            out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal, causal_align=align, window=window)
            torch.testing.assert_close(out, want, atol=1e-6, rtol=0, msg=lambda m: f"{window}: {m}")
            torch.testing.assert_close(lse, want_lse, atol=1e-6, rtol=0)


@pytest.mark.parametrize("device", VDEVICES)
def test_no_keys_at_all(device):
    """Nk = 0 with variants: zeros; lse −inf, or the sink."""
    device = use_vdevice(device)
    q = torch.randn(2, 4, 7, 32, device=device)
    k = v = torch.randn(2, 2, 0, 32, device=device)
    sinks = torch.tensor([0.5, -2.0, 1.0, 4.0], device=device)
    key_mask = torch.ones(2, 0, dtype=torch.bool, device=device)
    out, lse = torch_flashattn.attention_lse(q, k, v, window=(3, 0), key_mask=key_mask)
    assert (out == 0).all() and (lse == NEG_INF).all()
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=True, causal_align="bottom_right", sinks=sinks)
    assert (out == 0).all()
    torch.testing.assert_close(lse, sinks[None, :, None].expand(2, 4, 7), atol=1e-5, rtol=0)


@pytest.mark.parametrize("device", VDEVICES)
@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.float32])
@pytest.mark.parametrize("empty", ["B", "Nq", "Nk"])
def test_attn_mask_of_an_empty_problem(device, mask_dtype, empty):
    """An attn_mask beside B, Nq or Nk = 0 (it broadcasts to an empty shape): what SDPA gives, an
    empty output or zeros with lse −inf, and gradients of the inputs' shapes (an error before)."""
    device = use_vdevice(device)
    B, Nq, Nk = (0 if empty == "B" else 2), (0 if empty == "Nq" else 5), (0 if empty == "Nk" else 6)
    q = torch.randn(B, 4, Nq, 16, device=device, requires_grad=True)
    k, v = (torch.randn(B, 2, Nk, 16, device=device, requires_grad=True) for _ in range(2))
    mask = (torch.rand(B, 1, Nq, Nk, device=device) < 0.7) if mask_dtype == torch.bool \
        else torch.randn(B, 1, Nq, Nk, device=device)
    out, lse = torch_flashattn.attention_lse(q, k, v, attn_mask=mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    assert out.shape == expected.shape == (B, 4, Nq, 16) and lse.shape == (B, 4, Nq)
    assert (out == 0).all() and (lse == NEG_INF).all()
    out.sum().backward()
    assert q.grad.shape == q.shape and k.grad.shape == k.shape and (q.grad == 0).all()


# ---- varlen ------------------------------------------------------------------------------------

def cu(lengths, device):
    return torch.tensor([0] + list(torch.tensor(lengths).cumsum(0).tolist()), dtype=torch.int32, device=device)


def varlen_reference(q, k, v, lens_q, lens_k, as_pytorch=False, **variants):
    """Each packed sequence on its own through variant_reference (alibi (B, Hq) row b for
    sequence b): (out (total_q, Hq, d), lse (Hq, total_q)); float64 on the CPU, or as_pytorch:
    pytorch_like's computation."""
    out = torch.zeros(q.shape, dtype=q.dtype if as_pytorch else torch.float64)
    lse = torch.full((q.shape[1], q.shape[0]), NEG_INF, dtype=torch.float32 if as_pytorch else torch.float64)
    q, k, v = q.cpu(), k.cpu(), v.cpu()
    variants = tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, variants)
    sq = sk = 0
    for b, (nq, nk) in enumerate(zip(lens_q, lens_k)):
        kw = dict(variants)
        if kw.get("alibi_slopes") is not None and kw["alibi_slopes"].dim() == 2:
            kw["alibi_slopes"] = kw["alibi_slopes"][b]
        qb, kb, vb = (t[s:s + n].transpose(0, 1)[None] for t, s, n in ((q, sq, nq), (k, sk, nk), (v, sk, nk)))
        o, l = pytorch_like(qb, kb, vb, **kw) if as_pytorch else variant_reference(qb, kb, vb, **kw)
        out[sq:sq + nq] = o[0].transpose(0, 1)
        lse[:, sq:sq + nq] = l[0]
        sq, sk = sq + nq, sk + nk
    return out, lse


VARLEN_LENGTHS = [([5, 0, 33, 1, 70, 3], [9, 0, 33, 40, 50, 0]),   # an empty sequence, Nq_b < Nk_b, Nq_b > Nk_b,
                  ([1, 1, 1], [130, 7, 64]),                         # one query each (decoding)
                  ([64], [64])]
VARLEN_VARIANTS = {
    "plain": lambda B, Hq, g, dev: dict(),
    "causal_top_left": lambda B, Hq, g, dev: dict(causal=True),
    "causal_bottom_right": lambda B, Hq, g, dev: dict(causal=True, causal_align="bottom_right"),
    "window_bottom_right": lambda B, Hq, g, dev: dict(window=(12, 3), causal_align="bottom_right"),
    "softcap_alibi_batch_sinks": lambda B, Hq, g, dev: dict(
        softcap=2.0, alibi_slopes=(torch.rand(B, Hq, generator=g) * 0.2).to(dev), sinks=rand(g, Hq).to(dev)),
    "all_causal_bottom_right": lambda B, Hq, g, dev: dict(
        causal=True, causal_align="bottom_right", window=(20, -1), softcap=5.0, alibi_slopes=alibi_heads(Hq, dev),
        sinks=rand(g, Hq).to(dev)),
}


def run_varlen(q, k, v, lens_q, lens_k, **variants):
    device = q.device
    return torch_flashattn.attention_varlen(q, k, v, cu(lens_q, device), cu(lens_k, device), max(lens_q),
                                            max(lens_k), **variants)


def assert_varlen_accurate(out, q, k, v, lens_q, lens_k, what, lse=None, **variants):
    ref, ref_lse = varlen_reference(q, k, v, lens_q, lens_k, **variants)
    pt, pt_lse = varlen_reference(q, k, v, lens_q, lens_k, as_pytorch=True, **variants)
    assert out.shape == q.shape and out.dtype == q.dtype and out.device == q.device, what
    assert (out.cpu()[(ref_lse == NEG_INF).t()] == 0).all(), f"{what}: a row that sees no key is not 0"
    assert_rule(out, ref, pt, q.dtype, what)
    if lse is not None:
        assert lse.shape == (q.shape[1], q.shape[0]) and lse.dtype == torch.float32, what
        assert_lse(lse, ref_lse, pt_lse, what)


@pytest.mark.parametrize("kernel", VKERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("lengths", VARLEN_LENGTHS, ids=["ragged", "decode", "one"])
@pytest.mark.parametrize("case", list(VARLEN_VARIANTS))
def test_varlen_accuracy(kernel, dtype, lengths, case, fa_overrides):
    device = use_vkernel(kernel, dtype, fa_overrides)
    lens_q, lens_k = lengths
    B, Hq, Hkv, d = len(lens_q), 4, 2, 64
    g = torch.Generator().manual_seed(seed_of(case, lens_q))
    q = rand(g, sum(lens_q), Hq, d, dtype=dtype, device=device)
    k = rand(g, sum(lens_k), Hkv, d, dtype=dtype, device=device)
    v = rand(g, sum(lens_k), Hkv, d, dtype=dtype, device=device)
    variants = VARLEN_VARIANTS[case](B, Hq, g, device)
    out = run_varlen(q, k, v, lens_q, lens_k, **variants)
    assert_varlen_accurate(out, q, k, v, lens_q, lens_k, f"varlen {case} {dtype} {lengths}", **variants)


@pytest.mark.parametrize("kernel", VKERNELS)
def test_varlen_matches_padded_attention(kernel, fa_overrides):
    """A varlen call equals attention on each sequence alone (odd d, MQA, bottom-right window)."""
    device = use_vkernel(kernel, torch.float32, fa_overrides)
    g = torch.Generator().manual_seed(16)
    lens_q, lens_k = [17, 40, 2], [30, 40, 90]
    q, k, v = (rand(g, sum(n), h, 40, device=device) for n, h in ((lens_q, 4), (lens_k, 1), (lens_k, 1)))
    variants = dict(causal=True, causal_align="bottom_right", window=(25, -1), sinks=rand(g, 4, device=device))
    out = run_varlen(q, k, v, lens_q, lens_k, **variants)
    sq = sk = 0
    for nq, nk in zip(lens_q, lens_k):
        alone = torch_flashattn.attention(q[sq:sq + nq].transpose(0, 1)[None], k[sk:sk + nk].transpose(0, 1)[None],
                                          v[sk:sk + nk].transpose(0, 1)[None], **variants)
        torch.testing.assert_close(out[sq:sq + nq], alone[0].transpose(0, 1), atol=2e-6, rtol=0)
        sq, sk = sq + nq, sk + nk


@pytest.mark.parametrize("kernel", VKERNELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_varlen_lse(kernel, dtype, fa_overrides):
    """attention_varlen(..., return_lse=True): lse (Hq, total_q), where the API offers it."""
    if "return_lse" not in inspect.signature(torch_flashattn.attention_varlen).parameters:
        pytest.skip("attention_varlen has no return_lse")
    device = use_vkernel(kernel, dtype, fa_overrides)
    g = torch.Generator().manual_seed(17)
    lens_q, lens_k = VARLEN_LENGTHS[0]
    q = rand(g, sum(lens_q), 4, 64, dtype=dtype, device=device)
    k, v = (rand(g, sum(lens_k), 2, 64, dtype=dtype, device=device) for _ in range(2))
    variants = dict(causal=True, causal_align="bottom_right", softcap=3.0, sinks=rand(g, 4, device=device))
    out, lse = run_varlen(q, k, v, lens_q, lens_k, return_lse=True, **variants)
    assert_varlen_accurate(out, q, k, v, lens_q, lens_k, "varlen lse", lse=lse, **variants)
    assert torch.equal(out, run_varlen(q, k, v, lens_q, lens_k, **variants))


@pytest.mark.parametrize("kernel,dtype", [
    ("cpu", torch.float32), ("cpu", torch.bfloat16), ("cpu-exact", torch.float32),
    pytest.param("cuda-exact", torch.float32, marks=pytest.mark.gpu),
    pytest.param("cuda", torch.bfloat16, marks=pytest.mark.gpu), pytest.param("cuda-sm80", torch.bfloat16,
                                                                              marks=pytest.mark.gpu)])
@pytest.mark.parametrize("mask_dtype", ["float32", "query"])
@pytest.mark.parametrize("nk", [9, 72])
def test_attn_mask_of_the_float_minimum(kernel, dtype, mask_dtype, nk, fa_overrides):
    """A float mask of its dtype's minimum (torch.finfo(dtype).min, transformers' padding value), in
    fp32 or q's dtype: added to the scores, as SDPA does, a row masked so everywhere averages v over
    its keys (it once came out 0 with lse −inf, the mask's product with log2 e having overflowed);
    other rows as without it. nk = 72: rows of 16-byte multiples, which the Hopper kernel stages in
    shared memory when the mask has q's dtype. Gradients too: P from e / Σe, not exp(s − lse), whose
    lse cannot hold log Σe beside −3.4e38."""
    device = use_vkernel(kernel, dtype, fa_overrides)
    g = torch.Generator().manual_seed(21)
    q, k, v = (rand(g, 2, 4, n, 32, dtype=dtype, device=device).requires_grad_() for n in (6, nk, nk))
    dout = rand(g, 2, 4, 6, 32, dtype=dtype, device=device)
    mdtype = torch.float32 if mask_dtype == "float32" else dtype
    big = torch.finfo(mdtype).min
    mask = torch.zeros(2, 1, 6, nk, device=device, dtype=mdtype)
    mask[0, :, 2] = big                                  # a whole row
    mask[1, :, :, 5:] = big                              # keys of every row
    mask[1, :, 4, :3] = -big                             # a huge positive value wins its row
    out = torch_flashattn.attention(q, k, v, attn_mask=mask)
    with sdpa_kernel(SDPBackend.MATH):
        expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask.float())
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(out.float(), expected, atol=tol, rtol=0)
    torch.testing.assert_close(out[0, :, 2].float(), v[0].float().mean(1), atol=2e-2, rtol=0)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    expected_grads = torch.autograd.grad(expected, (q, k, v), dout.float())
    for name, a, b in zip("qkv", grads, expected_grads):
        torch.testing.assert_close(a.float(), b.float(), atol=5 * tol, rtol=0, msg=lambda m: f"d{name}: {m}")


@pytest.mark.parametrize("kernel", VKERNELS)
def test_varlen_empty_packed_tensors(kernel, fa_overrides):
    """No packed query or no packed key, whatever max_seqlen says: an empty output, or zeros with lse
    −inf (the sink with sinks), and gradients (an error about a NULL pointer before)."""
    device = use_vkernel(kernel, torch.float32, fa_overrides)
    g = torch.Generator().manual_seed(19)
    sinks = rand(g, 2, device=device)
    for tq, tk, cq, ck in ((0, 5, [0, 0, 0], [0, 2, 5]), (4, 0, [0, 1, 4], [0, 0, 0])):
        q = rand(g, tq, 2, 16, device=device).requires_grad_()
        k, v = (rand(g, tk, 1, 16, device=device).requires_grad_() for _ in range(2))
        cu_q, cu_k = (torch.tensor(c, dtype=torch.int32, device=device) for c in (cq, ck))
        for sk in (None, sinks):
            out, lse = torch_flashattn.attention_varlen(q, k, v, cu_q, cu_k, 4, 4, sinks=sk, return_lse=True)
            assert out.shape == q.shape and lse.shape == (2, tq) and (out == 0).all()
            expected = torch.full((2, tq), NEG_INF, device=device) if sk is None else sk[:, None].expand(2, tq)
            torch.testing.assert_close(lse, expected)
            (out.sum() + lse.clamp(min=-1e4).sum()).backward()
            assert q.grad.shape == q.shape and k.grad.shape == k.shape and (q.grad == 0).all()


@pytest.mark.parametrize("kernel", VKERNELS)
def test_varlen_max_seqlen_past_the_rows(kernel, fa_overrides):
    """A max_seqlen far past the packed rows (up to 2^62) bounds nothing: the tight one's output, lse
    and gradients, at once (2^40 kept the C backend looping over empty query tiles)."""
    device = use_vkernel(kernel, torch.float16 if kernel.startswith("cuda") else torch.float32, fa_overrides)
    dtype = torch.float16 if device == "cuda" else torch.float32
    g = torch.Generator().manual_seed(21)
    q = rand(g, 10, 2, 64, dtype=dtype, device=device).requires_grad_()
    k, v = (rand(g, 12, 2, 64, dtype=dtype, device=device).requires_grad_() for _ in range(2))
    cu_q, cu_k = (torch.tensor(c, dtype=torch.int32, device=device) for c in ([0, 4, 10], [0, 5, 12]))
    runs = []
    for mq, mk in ((6, 7), (2 ** 40, 2 ** 40), (2 ** 62, 10 ** 6)):
        out, lse = torch_flashattn.attention_varlen(q, k, v, cu_q, cu_k, mq, mk, causal=True, return_lse=True)
        runs.append((out, lse, *torch.autograd.grad(out.float().sum() + lse.sum(), (q, k, v))))
    # The C backend: the same bits; the exact path pads to max_seqlen, and CUDA sums dQ in any order.
    atol = 0 if kernel == "cpu" else 1e-5 if dtype == torch.float32 else 1e-3
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            torch.testing.assert_close(a, b, atol=atol, rtol=0)


@pytest.mark.parametrize("kernel", ["cpu", "cpu-exact", pytest.param("cuda-exact", marks=pytest.mark.gpu)])
def test_varlen_rows_past_the_last_sequence(kernel, fa_overrides):
    """Rows of q past cu_seqlens_q[B] belong to no sequence: NaN in out and lse, zero gradients (the
    CPU left them uninitialised). The CUDA kernels leave them unwritten (README Limits)."""
    device = use_vkernel(kernel, torch.float32, fa_overrides)
    g = torch.Generator().manual_seed(20)
    q = rand(g, 9, 2, 16, device=device).requires_grad_()
    k, v = (rand(g, 7, 2, 16, device=device) for _ in range(2))
    cu_q, cu_k = (torch.tensor(c, dtype=torch.int32, device=device) for c in ([0, 3, 6], [0, 4, 7]))
    out, lse = torch_flashattn.attention_varlen(q, k, v, cu_q, cu_k, 3, 4, return_lse=True)
    assert out[6:].isnan().all() and lse[:, 6:].isnan().all()
    assert not out[:6].isnan().any() and not lse[:, :6].isnan().any()
    out[:6].sum().backward()
    assert (q.grad[6:] == 0).all()


# ---- kvcache -----------------------------------------------------------------------------------

def kvcache_reference(q, k_cache, v_cache, lengths, as_pytorch=False, **variants):
    """Per sequence: the first lengths[b] cache rows, bottom-right aligned (δ = L_b − Nq)."""
    out = torch.zeros(q.shape, dtype=q.dtype if as_pytorch else torch.float64)
    cpu = tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, variants)
    for b, n in enumerate(lengths):
        kw = dict(cpu, causal_align="bottom_right")
        if kw.get("alibi_slopes") is not None and kw["alibi_slopes"].dim() == 2:
            kw["alibi_slopes"] = kw["alibi_slopes"][b:b + 1]
        qb, kb, vb = (t[b:b + 1].cpu() for t in (q, k_cache[:, :, :n], v_cache[:, :, :n]))
        out[b] = (pytorch_like(qb, kb, vb, **kw) if as_pytorch else variant_reference(qb, kb, vb, **kw))[0][0]
    return out


KVCACHE_VARIANTS = {
    "window": lambda B, Hq, g, dev: dict(window=(20, -1)),
    "window_causal": lambda B, Hq, g, dev: dict(window=(20, -1), causal=True),
    "window_both": lambda B, Hq, g, dev: dict(window=(6, 2)),
    "softcap_causal": lambda B, Hq, g, dev: dict(softcap=1.5, causal=True),
    "alibi_heads": lambda B, Hq, g, dev: dict(alibi_slopes=alibi_heads(Hq, dev), causal=True),
    "alibi_batch": lambda B, Hq, g, dev: dict(alibi_slopes=(torch.rand(B, Hq, generator=g) * 0.3).to(dev)),
    "sinks": lambda B, Hq, g, dev: dict(sinks=rand(g, Hq).to(dev) + 1),
    "all": lambda B, Hq, g, dev: dict(causal=True, window=(30, -1), softcap=4.0, alibi_slopes=alibi_heads(Hq, dev),
                                      sinks=rand(g, Hq).to(dev)),
}


@pytest.mark.parametrize("device", VDEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("nq,append", [(1, 0), (1, 1), (4, 3), (6, 0)])
@pytest.mark.parametrize("case", list(KVCACHE_VARIANTS))
def test_kvcache_variants(device, dtype, nq, append, case):
    device = use_vdevice(device)
    B, Hq, Hkv, Nmax, d = 4, 4, 2, 120, 64
    g = torch.Generator().manual_seed(seed_of(case, nq, append))
    q = rand(g, B, Hq, nq, d, dtype=dtype, device=device)
    k_cache, v_cache = (rand(g, B, Hkv, Nmax, d, dtype=dtype, device=device) for _ in range(2))
    k_new, v_new = ((rand(g, B, Hkv, append, d, dtype=dtype, device=device) for _ in range(2)) if append
                    else (None, None))
    seqlens = [0, 3, 50, Nmax - append]     # L_b = 0 (only the appended keys), L_b < Nq, ragged, full
    variants = KVCACHE_VARIANTS[case](B, Hq, g, device)
    k_expect, v_expect = k_cache.clone(), v_cache.clone()
    if append:
        for b, n in enumerate(seqlens):
            k_expect[b, :, n:n + append], v_expect[b, :, n:n + append] = k_new[b], v_new[b]
    out = torch_flashattn.attention_kvcache(q, k_cache, v_cache,
                                            cache_seqlens=torch.tensor(seqlens, dtype=torch.int32, device=device),
                                            k_new=k_new, v_new=v_new, **variants)
    assert torch.equal(k_cache, k_expect) and torch.equal(v_cache, v_expect), "append"
    lengths = [n + append for n in seqlens]
    what = f"kvcache {case} {dtype} nq={nq} append={append}: {describe(variants)}"
    assert out.shape == q.shape and out.dtype == dtype and out.device == q.device, what
    ref = kvcache_reference(q, k_cache, v_cache, lengths, **variants)
    pt = kvcache_reference(q, k_cache, v_cache, lengths, as_pytorch=True, **variants)
    assert (out.cpu()[ref.abs().amax(-1) == 0] == 0).all(), f"{what}: a row that sees no key is not 0"
    assert_rule(out, ref, pt, dtype, what)


@pytest.mark.parametrize("device", VDEVICES)
def test_kvcache_variants_match_attention(device):
    """Without cache_seqlens the whole cache is valid: the same as attention's bottom-right
    variants."""
    device = use_vdevice(device)
    g = torch.Generator().manual_seed(18)
    q = rand(g, 2, 4, 5, 32, device=device)
    k, v = (rand(g, 2, 2, 70, 32, device=device) for _ in range(2))
    variants = dict(causal=True, window=(9, -1), softcap=2.0, alibi_slopes=alibi_heads(4, device),
                    sinks=rand(g, 4, device=device))
    torch.testing.assert_close(torch_flashattn.attention_kvcache(q, k.clone(), v.clone(), **variants),
                               torch_flashattn.attention(q, k, v, causal_align="bottom_right", **variants),
                               atol=2e-6, rtol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("route", ["kvcache_window", "attention_key_mask"])
def test_alibi_past_2_25_keys(route):
    """ALiBi over 2²⁵ + 5 keys (bf16, d = 8: two 512 MB caches) on the split-KV kernel: the near keys,
    which carry the softmax, must get their exact distances |i + δ − j|. Formed from positions
    converted to float before the subtraction, distances 0..5 came out as 0, 1, 0, 3, 4, 5 and the
    output was off by 0.23 (bench/log/2026-12-06-alibi-plain/reviews/decode/alibi_dist.py).
    kvcache_window: attention_kvcache with window (63, −1), whose splits start from the window's
    first key (not a multiple of 16): the last 64 keys are all a reference needs. attention_key_mask:
    attention_lse, bottom-right, every key but one near the end visible (the key_mask route); with
    slope 0.5 the keys before the last 256 add less than e⁻⁹⁰ of the sum, so the reference takes
    those 256."""
    torch.manual_seed(27)
    N, d = (1 << 25) + 5, 8
    k, v = (torch.randn(1, 1, N, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    q = torch.randn(1, 1, 1, d, device="cuda", dtype=torch.bfloat16)
    slopes = torch.tensor([0.5], device="cuda")
    tail = 64 if route == "kvcache_window" else 256
    variants = dict(alibi_slopes=slopes, causal_align="bottom_right")
    if route == "attention_key_mask":
        key_mask = torch.ones(1, N, dtype=torch.bool, device="cuda")
        key_mask[0, N - 3] = False
        variants["key_mask"] = key_mask[:, -tail:]
    ref, ref_lse = exact(q, k[:, :, -tail:], v[:, :, -tail:], **variants)
    pt, pt_lse = pytorch_like(q, k[:, :, -tail:], v[:, :, -tail:], **variants)
    what = f"ALiBi over {N} keys, {route}"
    if route == "kvcache_window":
        out = torch_flashattn.attention_kvcache(q, k, v, alibi_slopes=slopes, window=(63, -1))
        assert_rule(out, ref, pt, torch.bfloat16, what)
    else:
        out, lse = torch_flashattn.attention_lse(q, k, v, alibi_slopes=slopes, causal_align="bottom_right",
                                                 key_mask=key_mask)
        assert_rule(out, ref, pt, torch.bfloat16, what)
        assert_lse(lse, ref_lse, pt_lse, what)


# ---- bad input ---------------------------------------------------------------------------------

def qkv(device, B=2, Hq=4, Hkv=2, Nq=8, Nk=10, d=16):
    return (torch.randn(B, Hq, Nq, d, device=device), torch.randn(B, Hkv, Nk, d, device=device),
            torch.randn(B, Hkv, Nk, d, device=device))


def raises(match, q, k, v, **kw):
    for fn in (torch_flashattn.attention, torch_flashattn.attention_lse):
        with pytest.raises((RuntimeError, ValueError), match=match):
            fn(q, k, v, **kw)


@pytest.mark.parametrize("device", DEVICES)
class TestBadVariants:
    @pytest.mark.parametrize("softcap", [0.0, -1.0])
    def test_softcap(self, device, softcap):
        q, k, v = qkv(device)
        raises("softcap", q, k, v, softcap=softcap)
        with pytest.raises((RuntimeError, ValueError), match="softcap"):
            torch_flashattn.attention_kvcache(q, k.clone(), v.clone(), softcap=softcap)

    def test_sinks(self, device):
        q, k, v = qkv(device)
        for bad in (torch.zeros(5, device=device), torch.zeros(2, 4, device=device),
                    torch.zeros(4, dtype=torch.float16, device=device),
                    torch.zeros(4, dtype=torch.float64, device=device),
                    torch.zeros(4, dtype=torch.int32, device=device)):
            raises("sinks", q, k, v, sinks=bad)

    def test_alibi_slopes(self, device):
        q, k, v = qkv(device)
        for bad in (torch.zeros(5, device=device), torch.zeros(3, 4, device=device),
                    torch.zeros(2, 4, 1, device=device), torch.zeros(2, 5, device=device)):
            raises("alibi_slopes", q, k, v, alibi_slopes=bad)

    def test_key_mask(self, device):
        q, k, v = qkv(device)
        for shape in ((2, 11), (3, 10), (10,), (2, 1, 10)):
            bad = torch.ones(shape, dtype=torch.bool, device=device)
            raises("key_mask", q, k, v, key_mask=bad)

    def test_attn_mask_not_broadcastable(self, device):
        q, k, v = qkv(device)
        for shape in ((9, 10), (8, 11), (2, 4, 8, 11), (3, 1, 1, 10), (1, 3, 8, 10), (1, 1, 1, 8, 10)):
            raises("attn_mask", q, k, v, attn_mask=torch.zeros(shape, device=device))
            raises("attn_mask", q, k, v, attn_mask=torch.ones(shape, dtype=torch.bool, device=device))

    def test_causal_align(self, device):
        q, k, v = qkv(device)
        for bad in ("top_right", "bottom-right", "", ["bottom_right"], {"bottom_right": 1}, None):
            raises("causal_align", q, k, v, causal=True, causal_align=bad)

    def test_window(self, device):
        q, k, v = qkv(device)
        for bad in ((-2, -1), (0, -5), (-3, 4), (2 ** 63, 0)):
            raises("window entries must be -1", q, k, v, window=bad)
            with pytest.raises((RuntimeError, ValueError), match="window"):
                torch_flashattn.attention_kvcache(q, k.clone(), v.clone(), window=bad)
        for bad in ((1.5, 0.5), (1.0, 0), ("1", 0), (1,), 3):     # not truncated to (1, 0): refused
            raises(r"window must be a pair \(left, right\) of ints", q, k, v, window=bad)
        import numpy as np
        torch.testing.assert_close(torch_flashattn.attention(q, k, v, window=(np.int64(2), torch.tensor(1))),
                                   torch_flashattn.attention(q, k, v, window=(2, 1)))

    def test_varlen_cu_seqlens_shape(self, device):
        q = torch.randn(10, 4, 16, device=device)
        k, v = torch.randn(12, 2, 16, device=device), torch.randn(12, 2, 16, device=device)
        good_q, good_k = cu([4, 6], device), cu([5, 7], device)
        for bad_q in (torch.tensor([0, 4], dtype=torch.int32, device=device)[None], good_q.long()):
            with pytest.raises((RuntimeError, ValueError), match="cu_seqlens_q"):
                torch_flashattn.attention_varlen(q, k, v, bad_q, good_k, 6, 7)
        with pytest.raises((RuntimeError, ValueError), match="cu_seqlens"):   # B + 1 entries each
            torch_flashattn.attention_varlen(q, k, v, good_q, cu([5, 4, 3], device), 6, 7)
        with pytest.raises((RuntimeError, ValueError), match="softcap"):
            torch_flashattn.attention_varlen(q, k, v, good_q, good_k, 6, 7, softcap=0.0)


def test_attn_mask_with_key_mask_is_allowed():
    """Both apply: the keys either hides are hidden."""
    q, k, v = qkv("cpu")
    km = torch.ones(2, 10, dtype=torch.bool)
    km[:, 4] = False
    am = torch.ones(8, 10, dtype=torch.bool)
    am[:, 6] = False
    out = torch_flashattn.attention(q, k, v, key_mask=km, attn_mask=am)
    both = km[:, None, None, :] & am
    torch.testing.assert_close(out, sdpa64(q, k, v, attn_mask=both).float(), atol=2e-6, rtol=0)


@pytest.mark.parametrize("which", ["q", "k"])
@pytest.mark.parametrize("bad", ["decreasing", "not_from_zero", "overrun", "too_short", "too_long"])
def test_varlen_bad_cu_seqlens_values(which, bad):
    """cu_seqlens read on the host (CPU tensors): each bad value raises naming the argument."""
    q, k, v = torch.randn(10, 4, 16), torch.randn(12, 2, 16), torch.randn(12, 2, 16)
    good = {"q": [0, 4, 10], "k": [0, 5, 12]}
    total = {"q": 10, "k": 12}[which]
    good[which] = {"decreasing": [0, 6, 4] if which == "q" else [0, 7, 5], "not_from_zero": [1, 4, total],
                   "overrun": [0, 4, total + 1], "too_short": [0, total], "too_long": [0, 2, 4, total]}[bad]
    cu_q, cu_k = (torch.tensor(good[n], dtype=torch.int32) for n in ("q", "k"))
    # A length mismatch may be blamed on either tensor; a bad value must name its own.
    match = "cu_seqlens" if bad in ("too_short", "too_long") else f"cu_seqlens_{which}"
    with pytest.raises((RuntimeError, ValueError), match=match):
        torch_flashattn.attention_varlen(q, k, v, cu_q, cu_k, 12, 12)


# ---- the torch op: opcheck and torch.compile -------------------------------------------------

class RecordFaOps(TorchDispatchMode):
    """Records the fa:: ops a call dispatches, with their arguments."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace == "fa":
            self.calls.append((func, args, kwargs))
        return func(*args, **kwargs)


def fa_ops_of(fn, *args, **kwargs):
    """The fa:: op calls fn makes, their tensors cloned (`torch_flashattn._ops_for_tests`, when the
    package defines it, maps fn's name to extra OpOverloads that must be among them)."""
    with RecordFaOps() as rec:
        fn(*args, **kwargs)
    calls = [(f, *tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, (a, kw)))
             for f, a, kw in rec.calls if any(isinstance(x, torch.Tensor) for x in a)]
    wanted = getattr(torch_flashattn, "_ops_for_tests", {}).get(fn.__name__, ())
    assert set(wanted) <= {f for f, _, _ in calls}, (wanted, calls)
    if not calls:
        pytest.skip(f"{fn.__name__} dispatched no fa:: op (nothing for opcheck)")
    return calls


def opcheck_cases(device):
    g = torch.Generator().manual_seed(19)
    q, k, v = make_qkv(g, 2, 4, 2, 13, 21, 16, torch.float32, device)
    full = dict(causal=True, causal_align="bottom_right", window=(6, -1), softcap=3.0,
                alibi_slopes=alibi_heads(4, device), sinks=rand(g, 4, device=device),
                key_mask=bernoulli(g, 0.8, 2, 21, device=device), attn_mask=rand(g, 1, 4, 13, 21, device=device))
    lens_q, lens_k = [5, 0, 8], [9, 4, 8]
    vq = rand(g, 13, 4, 16, device=device)
    vk, vv = (rand(g, 21, 2, 16, device=device) for _ in range(2))
    sl = torch.tensor([3, 7], dtype=torch.int32, device=device)
    kn, vn = (rand(g, 2, 2, 2, 16, device=device) for _ in range(2))
    return {
        "attention": (torch_flashattn.attention, (q, k, v), full),
        "attention_window_bool_mask": (torch_flashattn.attention, (q, k, v),
                                       dict(window=(2, 3), attn_mask=bernoulli(g, 0.7, 13, 21, device=device))),
        "attention_lse": (torch_flashattn.attention_lse, (q, k, v), full),
        "attention_varlen": (torch_flashattn.attention_varlen,
                             (vq, vk, vv, cu(lens_q, device), cu(lens_k, device), 8, 9),
                             dict(causal=True, causal_align="bottom_right", window=(4, -1), softcap=2.0,
                                  alibi_slopes=alibi_heads(4, device), sinks=rand(g, 4, device=device))),
        "attention_kvcache": (torch_flashattn.attention_kvcache, (q[:, :, :2], k.clone(), v.clone()),
                              dict(cache_seqlens=sl, k_new=kn, v_new=vn, causal=True, window=(5, -1), softcap=2.0,
                                   alibi_slopes=alibi_heads(4, device), sinks=rand(g, 4, device=device))),
    }


@pytest.mark.parametrize("device", VDEVICES)
@pytest.mark.parametrize("case", ["attention", "attention_window_bool_mask", "attention_lse", "attention_varlen",
                                  "attention_kvcache"])
def test_opcheck(device, case):
    device = use_vdevice(device)
    fn, args, kwargs = opcheck_cases(device)[case]
    for op, op_args, op_kwargs in fa_ops_of(fn, *args, **kwargs):
        torch.library.opcheck(op, op_args, op_kwargs)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph(device):
    """A block calling every public function with variants, compiled whole, equals eager."""
    g = torch.Generator().manual_seed(20)
    cases = opcheck_cases(device)

    def block(x):
        outs = []
        for name in ("attention", "attention_lse", "attention_varlen"):
            fn, args, kwargs = cases[name]
            outs.append(fn(args[0] * x, *args[1:], **kwargs))
        return outs

    x = rand(g, 1, device=device) + 2
    eager = block(x)
    compiled = torch.compile(block, fullgraph=True)(x)
    torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_kvcache(device):
    """attention_kvcache with variants under torch.compile: the same output and the same append."""
    fn, (q, k_cache, v_cache), kwargs = opcheck_cases(device)["attention_kvcache"]
    k2, v2 = k_cache.clone(), v_cache.clone()
    eager = fn(q, k_cache, v_cache, **kwargs)
    compiled = torch.compile(lambda q, k, v: fn(q, k, v, **kwargs).relu(), fullgraph=True)(q, k2, v2)
    torch.testing.assert_close(compiled, eager.relu(), atol=1e-5, rtol=1e-5)
    assert torch.equal(k2, k_cache) and torch.equal(v2, v_cache)


def test_cpu_exact_takes_the_exact_path():
    """The "cpu-exact" entries above test the exact path only if CPU calls really take it there: each
    such call is counted in stats()["exact"], and plain CPU calls are not."""
    g = torch.Generator().manual_seed(21)
    q, k, v = make_qkv(g, 1, 2, 2, 9, 11, 16, torch.float32, "cpu")
    torch_flashattn.reset_stats()
    torch_flashattn.attention(q, k, v, window=(3, 0))
    assert torch_flashattn.stats()["exact"] == 0
    with torch_flashattn._testing.exact_path():
        exact_out = torch_flashattn.attention(q, k, v, window=(3, 0))
        torch_flashattn.attention(q, k, v)                     # no variant: the C backend, not counted
    assert torch_flashattn.stats()["exact"] == 1
    assert torch.ops.fa._set_exact(False) is False             # the block restored the plain path
    torch.testing.assert_close(exact_out, torch_flashattn.attention(q, k, v, window=(3, 0)), atol=1e-6, rtol=0)


# ---- CUDA graphs -------------------------------------------------------------------------------

def capture(call):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()   # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call()
    return graph, out


@pytest.mark.gpu
def test_cuda_graph_key_mask():
    """A key_mask call captured once, replayed with new queries and a new key mask."""
    g = torch.Generator().manual_seed(21)
    B, Hq, Hkv, N, d = 2, 8, 2, 300, 128
    q, k, v = make_qkv(g, B, Hq, Hkv, N, N, d, torch.bfloat16, "cuda")
    km = bernoulli(g, 0.7, B, N, device="cuda")
    sinks = rand(g, Hq, device="cuda")
    variants = dict(causal=True, window=(100, -1), sinks=sinks)
    graph, out = capture(lambda: torch_flashattn.attention(q, k, v, key_mask=km, **variants))
    for p in (0.3, 0.9):
        q.copy_(rand(g, B, Hq, N, d, dtype=torch.bfloat16, device="cuda"))
        km.copy_(bernoulli(g, p, B, N, device="cuda"))
        km[1, :50] = False
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, torch_flashattn.attention(q, k, v, key_mask=km, **variants))
        assert_variant_accurate(out, None, q, k, v, what=f"graph key_mask p={p}", key_mask=km.clone(), **variants)


@pytest.mark.gpu
def test_cuda_graph_varlen():
    """A varlen call captured once, replayed with new sequence boundaries (same totals and maxima)
    and new queries."""
    g = torch.Generator().manual_seed(22)
    Hq, Hkv, d = 8, 2, 64
    lens_q, lens_k = [100, 1, 60, 39], [120, 30, 0, 50]
    q = rand(g, 200, Hq, d, dtype=torch.float16, device="cuda")
    k, v = (rand(g, 200, Hkv, d, dtype=torch.float16, device="cuda") for _ in range(2))
    cu_q, cu_k = cu(lens_q, "cuda"), cu(lens_k, "cuda")
    variants = dict(causal=True, causal_align="bottom_right", softcap=10.0, window=(64, -1))
    graph, out = capture(lambda: torch_flashattn.attention_varlen(q, k, v, cu_q, cu_k, 120, 120, **variants))
    for lq, lk in (([50, 50, 50, 50], [10, 90, 0, 100]), ([120, 0, 40, 40], [1, 120, 60, 19])):
        cu_q.copy_(cu(lq, "cuda"))
        cu_k.copy_(cu(lk, "cuda"))
        q.copy_(rand(g, 200, Hq, d, dtype=torch.float16, device="cuda"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, torch_flashattn.attention_varlen(q, k, v, cu_q, cu_k, 120, 120, **variants))
        assert_varlen_accurate(out, q, k, v, lq, lk, f"graph varlen {lq} {lk}", **variants)


# ---- random profile ----------------------------------------------------------------------------

N_CASES = int(os.environ.get("FA_VARIANT_CASES", "40"))
MAX_N = int(os.environ.get("FA_VARIANT_MAX_N", "200"))
EDGES = [1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129]


def draw_case(seed):
    """One random combination of variants (shapes, dtype, layout and each variant drawn
    independently, most of them half the time)."""
    rng = random.Random(seed)

    def size():
        sizes = [n for n in EDGES if n <= MAX_N]
        return rng.choice(sizes) if rng.random() < 0.5 else rng.randint(1, MAX_N)

    hkv = rng.randint(1, 2)
    c = dict(seed=seed, B=rng.randint(1, 3), Hkv=hkv, Hq=hkv * rng.choice([1, 2, 3]), Nq=size(), Nk=size(),
             d=rng.choice([16, 32, 40, 64, 80, 128, rng.randint(1, 256)]), dtype=rng.choice(DTYPES),
             layout=rng.choice(["contiguous", "bnhd"]))
    v = dict(causal=rng.random() < 0.4, causal_align=rng.choice(["top_left", "bottom_right"]))
    if rng.random() < 0.5:
        v["window"] = (rng.choice([-1, 0, rng.randint(0, MAX_N)]),
                       0 if v["causal"] else rng.choice([-1, 0, rng.randint(0, MAX_N)]))
    if rng.random() < 0.3:
        v["scale"] = rng.choice([0.0, 0.05, 0.5, -0.3])
    if rng.random() < 0.4:
        v["softcap"] = rng.choice([0.5, 2.0, 30.0])
    c["alibi"] = rng.choice([None, None, "heads", "batch"])
    c["sinks"] = rng.random() < 0.4
    c["key_mask"] = rng.choice([None, None, "bool", "int"])
    c["attn_mask"] = rng.choice([None, None, "bool_11QK", "float_B11K", "float_1HQK", "float_transposed",
                                 "qdtype_BHQK"])
    c["variants"] = v
    return c


def make_case(c, device):
    g = torch.Generator().manual_seed(c["seed"])
    B, Hq, Nq, Nk, dtype = c["B"], c["Hq"], c["Nq"], c["Nk"], c["dtype"]
    q, k, v = make_qkv(g, B, Hq, c["Hkv"], Nq, Nk, c["d"], dtype, device, c["layout"])
    variants = dict(c["variants"])
    if c["alibi"] == "heads":
        variants["alibi_slopes"] = alibi_heads(Hq, device)
    elif c["alibi"] == "batch":
        variants["alibi_slopes"] = (torch.rand(B, Hq, generator=g) * 0.3).to(device)
    if c["sinks"]:
        variants["sinks"] = (rand(g, Hq) * 2).to(device)
    if c["key_mask"] == "bool":
        variants["key_mask"] = bernoulli(g, 0.8, B, Nk, device=device)
    elif c["key_mask"] == "int":
        variants["key_mask"] = int_key_mask(g, B, Nk, device)
    masks = {"bool_11QK": lambda: bernoulli(g, 0.8, 1, 1, Nq, Nk, device=device),
             "float_B11K": lambda: rand(g, B, 1, 1, Nk, device=device),
             "float_1HQK": lambda: rand(g, 1, Hq, Nq, Nk, device=device),
             "float_transposed": lambda: transposed_mask(g, Nq, Nk, device),
             "qdtype_BHQK": lambda: rand(g, B, Hq, Nq, Nk, dtype=dtype, device=device)}
    if c["attn_mask"]:
        variants["attn_mask"] = masks[c["attn_mask"]]()
    return q, k, v, variants


@pytest.mark.parametrize("seed", range(N_CASES))
@pytest.mark.parametrize("kernel", VKERNELS)
def test_random_variants(kernel, seed, fa_overrides):
    c = draw_case(seed)
    device = use_vkernel(kernel, c["dtype"], fa_overrides)
    q, k, v, variants = make_case(c, device)
    what = (f"case {seed}: {c}\nreproduce: pytest -q 'tests/test_variants.py::test_random_variants[{kernel}-{seed}]'"
            f"\nor: from test_variants import draw_case, make_case; q, k, v, variants = make_case(draw_case({seed}), "
            f"'{device}')")
    try:
        out, lse = torch_flashattn.attention_lse(q, k, v, **variants)
    except RuntimeError as e:
        raise AssertionError(f"{what}\nraised: {e}") from e
    assert_variant_accurate(out, lse, q, k, v, what=what, **variants)
