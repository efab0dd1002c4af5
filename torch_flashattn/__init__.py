"""torch-flashattn: exact FlashAttention forward as a PyTorch custom op.

Importing this package loads the compiled extension, which registers
``torch.ops.fa.forward`` and ``torch.ops.fa.forward_lse`` for CPU tensors (a C
backend) and CUDA tensors, and registers their fake kernels so that
``torch.compile(fullgraph=True)`` traces them.

    >>> import torch, torch_flashattn
    >>> q = k = v = torch.randn(1, 8, 128, 64)
    >>> out = torch_flashattn.attention(q, k, v, causal=True)
"""
import operator
import os

import torch

from . import _C  # noqa: F401  (registers torch.ops.fa.*)
from . import _ops  # noqa: F401  (registers the fake kernels)
from . import _autograd  # registers the autograd formulas
from . import _testing
from ._version import __version__
from .sdpa import patch_sdpa, reset_stats, scaled_dot_product_attention, stats

__all__ = ["attention", "attention_lse", "attention_varlen", "attention_kvcache", "scaled_dot_product_attention",
           "patch_sdpa", "stats", "reset_stats", "has_cuda_kernels", "__version__"]


def _kernel_from_environment():
    """FA_KERNEL (auto, sm90, sm80, fp32tc, fp32, simt or turing) forces one CUDA kernel family for the whole
    process. It is read here, once; the library itself reads no environment."""
    family = os.environ.get("FA_KERNEL", "").strip() or "auto"
    if family not in _testing.FAMILIES:
        raise ValueError(f"FA_KERNEL={family!r}: expected one of {', '.join(_testing.FAMILIES)}")
    _testing.set_overrides(family=family)


_kernel_from_environment()


_ALIGN = {"top_left": 0, "bottom_right": 1}


def _align(causal_align):
    if not isinstance(causal_align, str) or causal_align not in _ALIGN:     # a list would not hash
        raise ValueError(f"causal_align must be 'top_left' or 'bottom_right', got {causal_align!r}")
    return _ALIGN[causal_align]


def _tensors(op, **named):
    """A TypeError naming the first argument that is not a tensor (None would reach the op as an
    undefined tensor, reported there as an empty 1-D one)."""
    for name, t in named.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")


def _seqlen(name, n):
    """max_seqlen_q / _k: an int the op's binding takes (a SymInt under torch.compile passes as it is)."""
    if isinstance(n, torch.SymInt):
        return n
    try:                                    # operator.index: ints (and integer scalars), not 7.0
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"attention_varlen: {name} must be an int, got {type(n).__name__}") from None
    if not -2 ** 63 <= n < 2 ** 63:
        raise ValueError(f"attention_varlen: {name} must be an int64, got {n}")
    return n


def _window(window):
    try:                                    # operator.index: ints (and integer scalars), not 1.5
        left, right = (operator.index(w) for w in window)
    except (TypeError, ValueError):
        raise ValueError(f"window must be a pair (left, right) of ints, got {window!r}") from None
    if left < -1 or right < -1 or max(left, right) >= 2 ** 63:
        raise ValueError(f"window entries must be -1 (unbounded) or in 0 .. 2**63 - 1, got {window!r}")
    return left, right


def _variants(q, k, v, causal, scale, causal_align, window, softcap, alibi_slopes, sinks, key_mask, attn_mask):
    """(out, lse) through fa.forward_variants; None when the call asks for no variant."""
    align = _align(causal_align)
    left, right = _window(window)
    if (align == 0 and left < 0 and right < 0 and softcap is None and alibi_slopes is None and sinks is None
            and key_mask is None and attn_mask is None):
        return None
    return _autograd.call(torch.ops.fa.forward_variants, q, k, v, scale, causal, align, left, right, softcap,
                          alibi_slopes, sinks, key_mask, attn_mask)


def attention(q, k, v, *, causal=False, scale=None, causal_align="top_left", window=(-1, -1), softcap=None,
              alibi_slopes=None, sinks=None, key_mask=None, attn_mask=None):
    """Exact scaled-dot-product attention, ``softmax(q kᵀ · scale) v``, and its variants.

    Without variants, the same result as ``F.scaled_dot_product_attention(q, k, v, is_causal=causal,
    scale=scale, enable_gqa=True)``, computed without storing the Nq × Nk score matrix.

    Args:
        q: (B, Hq, Nq, d) query, float32, float16 or bfloat16, CPU or CUDA.
        k: (B, Hkv, Nk, d) key; Hkv must divide Hq (grouped-query attention).
        v: (B, Hkv, Nk, d) value.
        causal: query i attends to keys j <= i + δ (δ from ``causal_align``).
        scale: multiplies q kᵀ; default ``1 / sqrt(d)``.
        causal_align: ``"top_left"`` (δ = 0, SDPA's ``is_causal``, also when Nq != Nk) or
            ``"bottom_right"`` (δ = Nk − Nq: the queries are the last Nq tokens), for ``causal``,
            ``window`` and ALiBi distances.
        window: (left, right): query i sees keys i + δ − left .. i + δ + right; −1 leaves a side
            unbounded. ``causal`` sets right to 0.
        softcap: c in [1.18e-38, 2.3e38]: each score s becomes c · tanh(s / c).
        alibi_slopes: float32 (Hq,) or (B, Hq): s −= slope · |i + δ − j|.
        sinks: float32 (Hq,): exp(sinks[h]) joins each row's softmax denominator with no value.
        key_mask: (B, Nk) bool or integer: keys where it is 0 take no part (padding).
        attn_mask: SDPA's mask, broadcastable to (B, Hq, Nq, Nk): bool (True takes part) or a
            float (q's dtype or float32) added to the scores after softcap and ALiBi.

    A row that sees no key returns zeros. Any strides are accepted; only the last dimension must
    be contiguous (other tensors are copied first). Head dim d is 1..256. On CUDA, fp16 and bf16
    calls run in the Hopper kernel on compute capability 9.0 and the sm_80 kernel on 8.x. Without
    variants, float32 calls run the fp32 kernels (``fp32tc`` on sm_80+, else ``fp32``) and GPUs
    before sm_80 their own kernels; a variant those kernels do not take (float32, GPUs before
    sm_80) is computed exactly through PyTorch in float32 (``stats()["exact"]`` counts those calls).

    Returns:
        (B, Hq, Nq, d) tensor of q's dtype and device, contiguous.
    """
    _tensors("attention", q=q, k=k, v=v)
    res = _variants(q, k, v, causal, scale, causal_align, window, softcap, alibi_slopes, sinks, key_mask, attn_mask)
    if res is not None:
        return res[0]
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return _autograd.call(torch.ops.fa.forward_lse, q, k, v, scale, causal)[0]  # its lse saved for the backward
    return _autograd.call(torch.ops.fa.forward, q, k, v, scale, causal)


def attention_lse(q, k, v, *, causal=False, scale=None, causal_align="top_left", window=(-1, -1), softcap=None,
                  alibi_slopes=None, sinks=None, key_mask=None, attn_mask=None):
    """Like :func:`attention`, and also returns the softmax log-sum-exp.

    Returns:
        ``(out, lse)``: out as in :func:`attention`; lse (B, Hq, Nq) float32, the natural log of
        row i's softmax denominator, ``log(sum_j exp(s_ij))`` over the keys it sees, plus
        ``exp(sinks[h])`` with sinks; ``-inf`` for a row that sees no key and has no sink.
    """
    _tensors("attention_lse", q=q, k=k, v=v)
    res = _variants(q, k, v, causal, scale, causal_align, window, softcap, alibi_slopes, sinks, key_mask, attn_mask)
    return _autograd.call(torch.ops.fa.forward_lse, q, k, v, scale, causal) if res is None else res


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, causal=False, scale=None,
                     causal_align="top_left", window=(-1, -1), softcap=None, alibi_slopes=None, sinks=None,
                     return_lse=False):
    """Attention over packed sequences of different lengths, each on its own.

    Args:
        q: (total_q, Hq, d): the B sequences' queries one after another.
        k, v: (total_k, Hkv, d).
        cu_seqlens_q, cu_seqlens_k: int32 (B + 1,) on q's device: sequence b is rows
            cu_seqlens[b] .. cu_seqlens[b + 1].
        max_seqlen_q, max_seqlen_k: the longest sequence's lengths (ints).
        causal, scale, causal_align, window, softcap, alibi_slopes ((Hq,) or (B, Hq)), sinks: as in
            :func:`attention`, per sequence (δ from that sequence's own lengths).
        return_lse: also return lse, (Hq, total_q) float32.

    On the CPU, cu_seqlens that do not start at 0, decrease, exceed max_seqlen or the rows of the
    tensors raise. On CUDA they are never read on the host (no synchronisation): such a call
    returns NaN everywhere. Rows of q past the last sequence belong to none: NaN on the CPU
    and on the exact path, left unwritten by the CUDA kernels (fp16/bf16).

    Returns:
        (total_q, Hq, d), or ``(out, lse)`` with ``return_lse``.
    """
    _tensors("attention_varlen", q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    max_seqlen_q, max_seqlen_k = _seqlen("max_seqlen_q", max_seqlen_q), _seqlen("max_seqlen_k", max_seqlen_k)
    left, right = _window(window)
    out, lse = _autograd.call(torch.ops.fa.forward_varlen, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                              max_seqlen_k, scale, causal, _align(causal_align), left, right, softcap, alibi_slopes,
                              sinks)
    return (out, lse) if return_lse else out


def attention_kvcache(q, k_cache, v_cache, *, cache_seqlens=None, k_new=None, v_new=None, causal=False,
                      scale=None, window=(-1, -1), softcap=None, alibi_slopes=None, sinks=None):
    """Attention of a few new queries over a KV cache, appending new keys first (CPU or CUDA).

    Args:
        q: (B, Hq, Nq, d) queries, usually Nq small (decoding, chunked prefill).
        k_cache, v_cache: (B, Hkv, Nmax, d) caches with a contiguous last dimension. Written in place
            when k_new / v_new are given.
        cache_seqlens: int32 (B,) on q's device, the number of valid keys in each cache before the
            append; default Nmax − Nnew for every sequence. An entry with cache_seqlens[b] + Nnew
            outside 0..Nmax raises on the CPU; on CUDA (never read on the host, so CUDA graphs can
            capture the call) it leaves the caches untouched and makes the output NaN.
        k_new, v_new: (B, Hkv, Nnew, d), written into the caches at rows cache_seqlens[b] .. + Nnew.
        causal: bottom-right aligned: query i of Nq sees keys j <= L_b − Nq + i, where L_b is the
            valid length after the append (the query tokens are the last Nq of the sequence).
        scale: multiplies q kᵀ; default 1/sqrt(d).
        window, softcap, alibi_slopes, sinks: as in :func:`attention`, with δ = L_b − Nq. On CUDA
            the split-KV kernel runs them for fp16 / bf16 on sm_80+; what it cannot take (fp32,
            older GPUs) is computed exactly through PyTorch (``stats()["exact"]``).

    Returns:
        (B, Hq, Nq, d). A query that sees no key returns zeros.
    """
    _tensors("attention_kvcache", q=q, k_cache=k_cache, v_cache=v_cache)
    left, right = _window(window)
    return torch.ops.fa.forward_kvcache(q, k_cache, v_cache, cache_seqlens, k_new, v_new, scale, causal, left, right,
                                        softcap, alibi_slopes, sinks)


def has_cuda_kernels():
    """True when the extension was built with its CUDA kernels."""
    return torch._C._dispatch_has_kernel_for_dispatch_key("fa::forward", "CUDA")
