"""torch-flashattn: exact FlashAttention forward as a PyTorch custom op.

Importing this package loads the compiled extension, which registers
``torch.ops.fa.forward`` and ``torch.ops.fa.forward_lse`` for CPU tensors (a C
backend) and CUDA tensors, and registers their fake kernels so that
``torch.compile(fullgraph=True)`` traces them.

    >>> import torch, torch_flashattn
    >>> q = k = v = torch.randn(1, 8, 128, 64)
    >>> out = torch_flashattn.attention(q, k, v, causal=True)
"""
import os

import torch

from . import _C  # noqa: F401  (registers torch.ops.fa.*)
from . import _ops  # noqa: F401  (registers the fake kernels)
from . import _testing
from ._version import __version__
from .sdpa import patch_sdpa, reset_stats, scaled_dot_product_attention, stats

__all__ = ["attention", "attention_lse", "attention_kvcache", "scaled_dot_product_attention", "patch_sdpa", "stats", "reset_stats",
           "has_cuda_kernels", "__version__"]


def _kernel_from_environment():
    """FA_KERNEL (auto, sm90, sm80, fp32tc, fp32 or simt) forces one CUDA kernel family for the whole
    process. It is read here, once; the library itself reads no environment."""
    family = os.environ.get("FA_KERNEL", "").strip() or "auto"
    if family not in _testing.FAMILIES:
        raise ValueError(f"FA_KERNEL={family!r}: expected one of {', '.join(_testing.FAMILIES)}")
    _testing.set_overrides(family=family)


_kernel_from_environment()


def attention(q, k, v, *, causal=False, scale=None):
    """Exact scaled-dot-product attention, ``softmax(q kᵀ · scale) v``.

    Same result as ``F.scaled_dot_product_attention(q, k, v, is_causal=causal,
    scale=scale, enable_gqa=True)``, computed without storing the Nq × Nk
    score matrix.

    Args:
        q: (B, Hq, Nq, d) query, float32, float16 or bfloat16, CPU or CUDA.
        k: (B, Hkv, Nk, d) key; Hkv must divide Hq (grouped-query attention).
        v: (B, Hkv, Nk, d) value.
        causal: top-left aligned causal mask, as SDPA's ``is_causal``: query
            row i attends to keys j <= i (also when Nq != Nk).
        scale: multiplies q kᵀ; default ``1 / sqrt(d)``.

    Any strides are accepted; only the last dimension must be contiguous
    (other tensors are copied first). Head dim d is 1..256.

    Returns:
        (B, Hq, Nq, d) tensor of q's dtype and device, contiguous.
    """
    return torch.ops.fa.forward(q, k, v, scale, causal)


def attention_lse(q, k, v, *, causal=False, scale=None):
    """Like :func:`attention`, and also returns the softmax log-sum-exp.

    Returns:
        ``(out, lse)``: out as in :func:`attention`; lse (B, Hq, Nq) float32,
        ``lse[b, h, i] = log(sum_j exp(scale · q_i · k_j))`` over the keys row i
        sees (natural log; ``-inf`` when Nk == 0).
    """
    return torch.ops.fa.forward_lse(q, k, v, scale, causal)


def attention_kvcache(q, k_cache, v_cache, *, cache_seqlens=None, k_new=None, v_new=None, causal=False,
                      scale=None):
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

    Returns:
        (B, Hq, Nq, d). A query that sees no key returns zeros.
    """
    return torch.ops.fa.forward_kvcache(q, k_cache, v_cache, cache_seqlens, k_new, v_new, scale, causal)


def has_cuda_kernels():
    """True when the extension was built with its CUDA kernels."""
    return torch._C._dispatch_has_kernel_for_dispatch_key("fa::forward", "CUDA")
