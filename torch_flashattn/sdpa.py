"""A drop-in for ``torch.nn.functional.scaled_dot_product_attention``.

``scaled_dot_product_attention`` has SDPA's exact signature and semantics. It runs ``fa::forward``
whenever the call is one this op computes exactly, and otherwise calls PyTorch's own SDPA, so the
result is always correct. Decoding-shaped calls (a few queries, no causal mask, a longer run of
keys: one generation step against a KV cache) go to ``fa::forward_kvcache``, whose split-KV kernel
spreads the keys over the whole GPU. ``stats()`` tells which path ran and why; ``patch_sdpa()``
routes ``F.scaled_dot_product_attention`` to this function inside a ``with`` block.

    >>> import torch_flashattn
    >>> with torch_flashattn.patch_sdpa():
    ...     logits = model(tokens)          # the model's F.scaled_dot_product_attention calls go to fa
    >>> torch_flashattn.stats()
    {'fa': 24, 'fa_decode': 0, 'sdpa': 0, 'eager': 0, 'exact': 0, 'fallback_reasons': {}}
"""
import collections
import contextlib
import functools
import logging
import threading

import torch
import torch.autograd.forward_ad as _fwad
import torch.nn.functional as F

from . import _autograd

__all__ = ["scaled_dot_product_attention", "patch_sdpa", "stats", "reset_stats"]

log = logging.getLogger("torch_flashattn")

# PyTorch's SDPA as it was at import, for fallbacks (also while patch_sdpa() is active).
_torch_sdpa = F.scaled_dot_product_attention

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_MAX_SCALE = 2.3e38             # fa.h's FA_MAX_SCALE: scale · log2 e must stay a finite float
# Calls with at most this many queries and more keys than queries, without a causal mask, run the
# split-KV decode kernel (fa::forward_kvcache with no append), as in a generation step.
DECODE_MAX_QUERIES = 16
# Calls that need gradients run on our kernels on the CPU: fp16 and bf16 (forward + backward 1.9-20x
# and 1.2-6.5x torch's CPU SDPA on 2 cores of an AMD EPYC, 28 shapes each; bf16 on AMX CPUs below), fp32
# from this many key elements per head (Nk · E: 1.3-2.4x there, 0.7-1.2x below, 32 keys of 32 the
# slowest; tools/cpu_grad_time.py, bench/LOG.md 2026-12-02-backward; on 2 cores of an Intel Xeon with
# AMX, 0.87-1.56x from it, non-causal calls the slower: 2026-12-06-amx). On CUDA, compute capability
# 9.0, fp16/bf16 calls at head dim 64 or 128 (the Hopper backward's tile widths) with at least
# CUDA_GRAD_MIN_KEYS keys run on our forward and Hopper backward (_cuda_grad_ours): on the H200, forward
# + backward 1.02-1.15x SDPA's default there (cuDNN) from 2k keys, 0.96-1.04x below (bf16, at 44668d3;
# bench/results/backward_fwdbwd_44668d3.md).
# Every other CUDA call that needs gradients stays on SDPA: other GPUs run our sm_80 kernel, 0.78-0.95x
# SDPA's flash backend.
CPU_GRAD_MIN_KEY_ELEMENTS = 4096
CUDA_GRAD_MIN_KEYS = 2048
# On a CPU with AMX-BF16 tiles (Intel Xeon from Sapphire Rapids on), torch's CPU SDPA runs bf16 matmuls
# on them; our C backend computes bf16 in fp32. There (2 cores, bench/LOG.md 2026-12-06-amx) ours ran
# bf16 prefill at 0.25-0.60x SDPA, and forward + backward at 0.66-1.48x above this many key elements per
# head (1.26-7.6x at or below it): bf16 calls without gradients (_cpu_amx_sdpa), and those with
# gradients above it (_cpu_grad_ours), go to SDPA. Decoding steps stay on fa::forward_kvcache (0.47-1.40x
# there, geomean 0.94x).
CPU_AMX_GRAD_MAX_KEY_ELEMENTS = 16384
_counts = collections.Counter()
_reasons = collections.Counter()


def stats():
    """Calls served so far: ``{"fa": n, "fa_decode": n, "sdpa": n, "eager": n, "exact": n,
    "fallback_reasons": {reason: n}}``; ``fa`` counts every drop-in call our kernels served,
    ``fa_decode`` the decoding steps among them (at most ``DECODE_MAX_QUERIES`` queries against more
    keys: the drop-in's ``fa::forward_kvcache`` calls, and the transformers backend's steps with a
    padding mask, which the op's split-KV route takes on CUDA), ``sdpa`` the calls PyTorch's
    SDPA computed and ``eager`` those the transformers backend sent to the model's own eager
    attention (``torch_flashattn.hf``). ``exact`` counts op calls, forward or backward, that no CUDA
    kernel takes (variants in fp32 or on GPUs before sm_80, gradients the backward kernels decline:
    README "Gradients"), which the op computed exactly through PyTorch (any entry point)."""
    return {"fa": _counts["fa"], "fa_decode": _counts["fa_decode"], "sdpa": _counts["sdpa"],
            "eager": _counts["eager"], "exact": torch.ops.fa._exact_calls(), "fallback_reasons": dict(_reasons)}


def reset_stats():
    _counts.clear()
    _reasons.clear()
    torch.ops.fa._exact_calls(True)


@functools.cache
def _capability(index):
    return torch.cuda.get_device_capability(index)


def _rows_aligned(t):
    """Rows the Hopper kernel's TMA loads take: contiguous last dim, 16-byte aligned rows and base."""
    return (t.stride(-1) == 1 and all(s % 8 == 0 for s, n in zip(t.stride()[:-1], t.shape[:-1]) if n > 1)
            and t.shape[-1] % 8 == 0 and t.data_ptr() % 16 == 0)


def _mask_in_kernel(query, key, value, attn_mask, is_causal, scale):
    """Whether an attn_mask call runs in a tensor-core kernel (fa::forward_variants: the Hopper kernel on
    compute capability 9.0, the sm_80 kernel on 8.x) rather than its exact path: fp16 / bf16
    (B, H, L, E) inputs with rows the Hopper kernel loads (_rows_aligned), S >= 1, a scale >= 0, a bool,
    float32 or query-dtype mask on their device that broadcasts to (B, H, L, S) and needs no gradient,
    and no is_causal beside it (SDPA raises). On the H200, the sm_80 kernel forced (what 8.x runs) took
    every mask of bench/results/variants_sm80.md 1.2-29x faster than SDPA's efficient backend."""
    if not (query.device.type == "cuda" and query.dtype in (torch.float16, torch.bfloat16) and query.dim() == 4
            and key.dim() == 4 and value.dim() == 4 and key.shape[2] >= 1 and not is_causal
            and (scale is None or scale >= 0) and attn_mask.device == query.device and attn_mask.dim() <= 4
            and attn_mask.dtype in (torch.bool, torch.float32, query.dtype) and not attn_mask.requires_grad
            and all(_rows_aligned(t) for t in (query, key, value))):
        return False
    target = (query.shape[0], query.shape[1], query.shape[2], key.shape[2])
    if any(m not in (1, t) for m, t in zip(reversed(attn_mask.shape), reversed(target))):
        return False
    return _capability(query.device.index) >= (8, 0)


def _needs_grad(query, key, value):
    return torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad)


@functools.cache
def _cpu_amx_bf16():
    """Whether this CPU has AMX-BF16 tiles (torch's CPU SDPA then computes bf16 on them)."""
    capabilities = getattr(torch.cpu, "get_capabilities", None)   # torch 2.10 and later
    return bool(capabilities is not None and capabilities().get("amx_bf16", False))


def _cpu_amx_sdpa(query, key, value, is_causal):
    """Whether a bf16 CPU call without gradients goes to SDPA's AMX kernel: on a CPU with AMX-BF16,
    every such call but a decoding step (_is_decode; CPU_AMX_GRAD_MAX_KEY_ELEMENTS' comment)."""
    return (query.device.type == "cpu" and query.dtype == torch.bfloat16 and _cpu_amx_bf16()
            and not _is_decode(query, key, value, is_causal))


def _cpu_grad_ours(query, key):
    """Whether our forward + backward beats torch's CPU SDPA for a call needing gradients: on the CPU,
    fp16/bf16 (on a CPU with AMX-BF16, bf16 up to CPU_AMX_GRAD_MAX_KEY_ELEMENTS key elements per head),
    or fp32 from CPU_GRAD_MIN_KEY_ELEMENTS key elements per head."""
    if query.device.type != "cpu":
        return False
    elements = key.shape[-2] * key.shape[-1]
    if query.dtype == torch.float32:
        return elements >= CPU_GRAD_MIN_KEY_ELEMENTS
    return not (query.dtype == torch.bfloat16 and _cpu_amx_bf16() and elements > CPU_AMX_GRAD_MAX_KEY_ELEMENTS)


def _cuda_grad_ours(query, key, value, attn_mask):
    """Whether a CUDA call that needs gradients runs on our forward and Hopper backward
    (sm90_backward.cu), faster there than SDPA's default backend: compute capability 9.0, fp16 / bf16,
    head dim 64 or 128, at least CUDA_GRAD_MIN_KEYS keys, rows its TMA loads take, no attn_mask."""
    return (attn_mask is None and min(query.dim(), key.dim(), value.dim()) >= 2
            and query.dtype in (torch.float16, torch.bfloat16) and query.shape[-1] in (64, 128)
            and key.shape[-2] >= CUDA_GRAD_MIN_KEYS   # differing head dims: _fallback_reason's check
            and all(_rows_aligned(t) for t in (query, key, value))
            and _capability(query.device.index) == (9, 0))


def _tangents(tensors):
    """Whether forward-mode AD is at work on these inputs: a torch.func transform is active (jvp,
    jacfwd, grad, ...; the ops have no forward formula and their autograd registration does not run
    under functorch's grad) or one of them is a dual tensor of torch.autograd.forward_ad. Eager mode."""
    if torch._C._functorch.peek_interpreter_stack() is not None:
        return True
    return _fwad._current_level >= 0 and any(
        isinstance(t, torch.Tensor) and _fwad.unpack_dual(t).tangent is not None for t in tensors)


def _subclassed(tensors):
    """Whether a tensor subclass may answer the call its own way (one with its own __torch_function__
    would see our ops, never SDPA; DTensor and its kind dispatch our ops, for which they have no rule):
    in eager mode any subclass but Parameter and the tracers' own tensors (FakeTensor and FunctionalTensor:
    torch.export and make_fx trace our ops). Types, not torch.overrides.has_torch_function, which any
    active TorchFunctionMode (torch.set_default_device, `with torch.device(...)`) makes true. Eager mode."""
    plain = (torch.Tensor, torch.nn.Parameter) + _tracer_tensors()
    return any(t is not None and type(t) not in plain for t in tensors)


_tracers = None


def _tracer_tensors():
    """The tensor subclasses torch's own tracers hand the drop-in (non-strict export, make_fx)."""
    global _tracers
    if _tracers is None:
        from torch._subclasses.fake_tensor import FakeTensor
        from torch._subclasses.functional_tensor import FunctionalTensor
        _tracers = (FakeTensor, FunctionalTensor)
    return _tracers


def _argument_reason(attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """Arguments SDPA itself must judge: types its binding refuses (it raises) and dropout."""
    if (type(is_causal) is bool and type(enable_gqa) is bool and type(dropout_p) is float and dropout_p == 0.0
            and (scale is None or type(scale) is float) and (attn_mask is None or type(attn_mask) is torch.Tensor)):
        return None                                         # the usual call, in one test
    if not (isinstance(is_causal, bool) and isinstance(enable_gqa, bool)):
        return "is_causal or enable_gqa not a bool"
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        return "scale not a Python number"
    if not isinstance(dropout_p, (int, float)) or isinstance(dropout_p, bool) or dropout_p != 0.0:
        return "dropout_p > 0" if isinstance(dropout_p, (int, float)) and dropout_p > 0.0 else "dropout_p not 0"
    if attn_mask is not None and not isinstance(attn_mask, torch.Tensor):
        return "attn_mask not a tensor"
    return None


def _fallback_reason(query, key, value, attn_mask, dropout_p, enable_gqa, is_causal, scale, grad):
    """Why fa::forward (or, with an attn_mask, fa::forward_variants) cannot compute this call
    exactly, or None when it can. grad: _needs_grad's answer."""
    reason = _argument_reason(attn_mask, dropout_p, is_causal, scale, enable_gqa)
    if reason is not None:
        return reason
    if not (isinstance(query, torch.Tensor) and isinstance(key, torch.Tensor) and isinstance(value, torch.Tensor)):
        return "query, key or value not a tensor"
    if query.is_nested or key.is_nested or value.is_nested:
        return "nested tensors"
    if not torch.compiler.is_compiling():          # eager mode: the flags, transforms and types of the call
        if _subclassed((query, key, value, attn_mask)):
            return "a tensor subclass"
        if not torch._C._get_flash_sdp_enabled():      # torch.backends.cuda.flash_sdp_enabled()
            return "sdpa_kernel without FLASH_ATTENTION"   # the caller chose SDPA's other backends
        if _tangents((query, key, value, attn_mask)):
            return "forward-mode AD or a torch.func transform"
    if attn_mask is not None and not _mask_in_kernel(query, key, value, attn_mask, is_causal, scale):
        return "attn_mask"
    if scale is not None and not abs(scale) <= _MAX_SCALE:
        return "scale past 2.3e38"              # fa.h's FA_MAX_SCALE: our ops raise, SDPA computes
    qs, ks, vs = query.shape, key.shape, value.shape
    if not (len(qs) == len(ks) == len(vs) and len(qs) in (3, 4)):
        return "not 3-D or 4-D"
    device = query.device
    if grad:                                    # the gradient rules read rows: after the rank check
        if device.type != "cpu":
            if not (device.type == "cuda" and _cuda_grad_ours(query, key, value, attn_mask)):
                return "requires_grad (SDPA's backward is faster)"
        elif not _cpu_grad_ours(query, key):
            return ("requires_grad, few keys (SDPA's backward is faster)" if query.dtype == torch.float32
                    else "requires_grad, bf16 on an AMX CPU (SDPA's AMX kernel is faster)")
    if query.dtype not in _DTYPES or not (query.dtype == key.dtype == value.dtype):
        return f"dtype {query.dtype}"
    if device.type not in ("cpu", "cuda") or not (device == key.device == value.device):
        return f"device {device}"
    if not (qs[-1] == ks[-1] == vs[-1]) or not 1 <= qs[-1] <= 256:
        return "head dims differ or exceed 256"
    if len(qs) == 4 and qs[1] != ks[1]:
        if not enable_gqa:
            return "Hq != Hkv without enable_gqa"   # SDPA raises its own error for this
        if ks[1] == 0 or qs[1] % ks[1] != 0:
            return "Hq not a multiple of Hkv"       # SDPA raises its own error for this
    if ks[:-1] != vs[:-1] or qs[0] != ks[0]:
        return "shapes differ"                  # SDPA broadcasts them or raises its own error
    if not grad and _cpu_amx_sdpa(query, key, value, is_causal):
        return "bf16 on an AMX CPU (SDPA's AMX kernel is faster)"
    return None


def _is_decode(query, key, value, is_causal):
    """A generation step: few queries against more keys, no mask (SDPA's top-left causal mask is not
    the cache's bottom-right one, so causal calls stay on fa::forward), and caches whose last
    dimension is contiguous, as fa::forward_kvcache reads them."""
    return (query.dim() == 4 and not is_causal and query.shape[2] <= DECODE_MAX_QUERIES
            and key.shape[2] > query.shape[2] and key.stride(3) == 1 and value.stride(3) == 1)


def _count(path, reason=None, decode=False):
    """One call served by path (and, decode: by fa::forward_kvcache, counted under "fa_decode" too)."""
    if torch.compiler.is_compiling():   # counters are eager-mode bookkeeping; keep traced graphs whole
        return
    _counts[path] += 1
    if decode:
        _counts["fa_decode"] += 1
    if reason is not None:
        _reasons[reason] += 1
        log.debug("scaled_dot_product_attention: PyTorch SDPA (%s)", reason)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
                                 enable_gqa=False):
    """``F.scaled_dot_product_attention`` with the same signature and results.

    Runs the FlashAttention kernel (``fa::forward``) for calls without dropout (and, when inputs
    require grad, through ``fa::forward_lse`` and our backward: on the CPU fp16/bf16, and fp32 with at
    least ``CPU_GRAD_MIN_KEY_ELEMENTS`` key elements per head; on CUDA fp16/bf16 calls on compute
    capability 9.0 at head dim 64 or 128 with at least ``CUDA_GRAD_MIN_KEYS`` keys), float32/float16/bfloat16 on CPU or CUDA, (B, H, L, E) or (B, L, E) tensors with
    one head dim ≤ 256; decoding steps (L ≤ ``DECODE_MAX_QUERIES`` queries against S > L keys, not
    causal) run ``fa::forward_kvcache`` over the keys as a cache. An ``attn_mask`` runs in the Hopper
    kernel (compute capability 9.0) or the sm_80 kernel (8.x) through ``fa::forward_variants``, the mask
    read tile by tile, for fp16/bf16 (B, H, L, E) inputs. Anything else goes to PyTorch's SDPA. ``is_causal`` is SDPA's top-left
    mask in every case. Under autocast the inputs are cast as autocast casts SDPA's; inside
    ``torch.nn.attention.sdpa_kernel`` without the flash backend, with forward-mode AD or under a
    ``torch.func`` transform, for nested tensors and tensor subclasses, and for arguments of types
    SDPA's binding refuses, SDPA itself runs.
    """
    query, key, value, attn_mask = _autocast(query, key, value, attn_mask)
    tensors = all(isinstance(t, torch.Tensor) for t in (query, key, value))
    grad = _needs_grad(query, key, value) if tensors else False   # else SDPA itself runs (and raises)
    reason = _fallback_reason(query, key, value, attn_mask, dropout_p, enable_gqa, is_causal, scale, grad)
    if reason is not None:
        _count("sdpa", reason)
        return _torch_sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                           scale=scale, enable_gqa=enable_gqa)
    decode = False
    if attn_mask is not None:
        out = _autograd.call(torch.ops.fa.forward_variants, query, key, value, scale, False, 0, -1, -1, None, None,
                             None, None, attn_mask)[0]
    elif grad:                            # fa::forward_lse keeps lse for the backward; no KV-cache op
        if query.dim() == 3:
            out = torch.ops.fa.forward_lse(query[:, None], key[:, None], value[:, None], scale, is_causal)[0][:, 0]
        else:
            out = torch.ops.fa.forward_lse(query, key, value, scale, is_causal)[0]
    elif _is_decode(query, key, value, is_causal) and not torch.compiler.is_compiling():
        # Eager only: fa::forward_kvcache declares its caches written, and inductor with dynamic shapes
        # loses a written view's offset (PyTorch #198068), which read k and v from their buffer's start.
        decode = True
        out = torch.ops.fa.forward_kvcache(query, key, value, None, None, None, scale, False)
    elif query.dim() == 3:   # (B, L, E): one head
        out = _autograd.call(torch.ops.fa.forward, query[:, None], key[:, None], value[:, None], scale, is_causal)[:, 0]
    else:
        out = _autograd.call(torch.ops.fa.forward, query, key, value, scale, is_causal)
    _count("fa", decode=decode)           # after the op: a call it refused is not counted as served
    return out


def _autocast(query, key, value, attn_mask):
    """The inputs as autocast hands them to SDPA (one of its lower-precision ops): floating tensors
    but float64 cast to the autocast dtype of q's device type while autocast is on there."""
    if not torch._C._is_any_autocast_enabled() or not isinstance(query, torch.Tensor) \
            or not torch.is_autocast_enabled(query.device.type):
        return query, key, value, attn_mask
    dtype = torch.get_autocast_dtype(query.device.type)
    return tuple(t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64
                 and t.device.type == query.device.type else t for t in (query, key, value, attn_mask))


_patch_lock = threading.Lock()
_patch_depth = 0
_patch_before = None


@contextlib.contextmanager
def patch_sdpa():
    """Inside the block, ``torch.nn.functional.scaled_dot_product_attention`` is this module's
    function. The patch is process-wide: the first block to enter (in any thread) installs it, and
    the last to leave restores what was there before, also on an exception, so that blocks nest and
    threads may overlap. Code that imported the function by name before the block (``from
    torch.nn.functional import ...``) keeps its own reference and is not affected."""
    global _patch_depth, _patch_before
    with _patch_lock:
        if _patch_depth == 0:
            _patch_before = F.scaled_dot_product_attention
            F.scaled_dot_product_attention = scaled_dot_product_attention
        _patch_depth += 1
    try:
        yield
    finally:
        with _patch_lock:
            _patch_depth -= 1
            if _patch_depth == 0:
                F.scaled_dot_product_attention = _patch_before
                _patch_before = None
