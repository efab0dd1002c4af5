"""Fake (meta) kernels of the fa:: ops, for torch.compile and FakeTensor tracing.

They only describe the outputs; validation happens in the real kernels
(csrc/fa_torch.cpp), which raise the same errors at run time.
"""
import torch


def _out_like(q):
    torch._check(q.dim() == 4, lambda: f"fa.forward: q must be a 4-D tensor (B, H, N, d), got {q.dim()}-D")
    return q.new_empty(q.shape)


@torch.library.register_fake("fa::forward")
def _forward_fake(q, k, v, scale=None, causal=False):
    return _out_like(q)


@torch.library.register_fake("fa::forward_lse")
def _forward_lse_fake(q, k, v, scale=None, causal=False):
    out = _out_like(q)
    return out, q.new_empty(q.shape[:3], dtype=torch.float32)
