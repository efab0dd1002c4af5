"""Fake (meta) kernels of the fa:: ops, for torch.compile and FakeTensor tracing.

They only describe the outputs; validation happens in the real kernels
(csrc/fa_torch.cpp), which raise the same errors at run time.
"""
import torch


def _out_like(q, k, v):
    for name, t in (("q", q), ("k", k), ("v", v)):
        torch._check(t.dim() == 4, lambda: f"fa.forward: {name} must be a 4-D tensor (B, H, N, d), got {t.dim()}-D")
        torch._check(t.device == q.device, lambda: "fa.forward: q, k and v must be on the same device, "
                     f"got q on {q.device} and {name} on {t.device}")
    return q.new_empty(q.shape)


@torch.library.register_fake("fa::forward")
def _forward_fake(q, k, v, scale=None, causal=False):
    return _out_like(q, k, v)


@torch.library.register_fake("fa::forward_lse")
def _forward_lse_fake(q, k, v, scale=None, causal=False):
    return _out_like(q, k, v), q.new_empty(q.shape[:3], dtype=torch.float32)


@torch.library.register_fake("fa::naive_forward")
def _naive_forward_fake(q, k, v, scale=None, causal=False):
    return _out_like(q, k, v)


@torch.library.register_fake("fa::forward_kvcache")
def _forward_kvcache_fake(q, k_cache, v_cache, cache_seqlens=None, k_new=None, v_new=None, scale=None,
                          causal=False):
    return _out_like(q, k_cache, v_cache)
