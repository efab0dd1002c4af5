"""Fake (meta) kernels of the fa:: ops, for torch.compile and FakeTensor tracing.

They describe the outputs; validation happens in the real kernels (csrc/fa_torch.cpp), which raise
the same errors at run time. One check is theirs too: every tensor argument on q's device. A meta
tensor among CPU ones sends the call here rather than to a real kernel, which would have raised;
without the check such a call returned uninitialised memory.
"""
import torch


def _on_q_device(op, q, **tensors):
    for name, t in tensors.items():
        if t is not None:
            torch._check(t.device == q.device,
                         lambda: f"{op}: {name} must be on q's device {q.device}, got {t.device}")


def _out_like(op, q, k, v, names=("q", "k", "v")):
    for name, t in zip(names, (q, k, v)):
        torch._check(t.dim() == 4, lambda: f"{op}: {name} must be a 4-D tensor (B, H, N, d), got {t.dim()}-D")
        torch._check(t.device == q.device, lambda: f"{op}: {names[0]}, {names[1]} and {names[2]} must be on the same "
                     f"device, got q on {q.device} and {name} on {t.device}")
    return q.new_empty(q.shape)


@torch.library.register_fake("fa::forward")
def _forward_fake(q, k, v, scale=None, causal=False):
    return _out_like("fa.forward", q, k, v)


@torch.library.register_fake("fa::forward_lse")
def _forward_lse_fake(q, k, v, scale=None, causal=False):
    return _out_like("fa.forward_lse", q, k, v), q.new_empty(q.shape[:3], dtype=torch.float32)


@torch.library.register_fake("fa::naive_forward")
def _naive_forward_fake(q, k, v, scale=None, causal=False):
    return _out_like("fa.naive_forward", q, k, v)


@torch.library.register_fake("fa::forward_kvcache")
def _forward_kvcache_fake(q, k_cache, v_cache, cache_seqlens=None, k_new=None, v_new=None, scale=None,
                          causal=False, window_left=-1, window_right=-1, softcap=None, alibi_slopes=None, sinks=None):
    _on_q_device("fa.forward_kvcache", q, k_cache=k_cache, v_cache=v_cache, cache_seqlens=cache_seqlens, k_new=k_new,
                 v_new=v_new, alibi_slopes=alibi_slopes, sinks=sinks)
    return _out_like("fa.forward_kvcache", q, k_cache, v_cache, ("q", "k_cache", "v_cache"))


def _variants_fake(q, k, v, scale=None, causal=False, align=0, window_left=-1, window_right=-1, softcap=None,
                   alibi_slopes=None, sinks=None, key_mask=None, attn_mask=None):
    _on_q_device("fa.forward_variants", q, alibi_slopes=alibi_slopes, sinks=sinks, key_mask=key_mask,
                 attn_mask=attn_mask)
    return _out_like("fa.forward_variants", q, k, v), q.new_empty(q.shape[:3], dtype=torch.float32)


torch.library.register_fake("fa::forward_variants")(_variants_fake)


def _varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, scale=None, causal=False, align=0,
                 window_left=-1, window_right=-1, softcap=None, alibi_slopes=None, sinks=None):
    for name, t in (("q", q), ("k", k), ("v", v)):
        torch._check(t.dim() == 3, lambda: f"fa.forward_varlen: {name} must be a 3-D tensor (total, H, d), "
                     f"got {t.dim()}-D")
    _on_q_device("fa.forward_varlen", q, k=k, v=v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                 alibi_slopes=alibi_slopes, sinks=sinks)
    return q.new_empty(q.shape), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)


torch.library.register_fake("fa::forward_varlen")(_varlen_fake)


@torch.library.register_fake("fa::backward")
def _backward_fake(dout, q, k, v, out, lse, dlse=None, scale=None, causal=False, align=0, window_left=-1,
                   window_right=-1, softcap=None, alibi_slopes=None, sinks=None, key_mask=None, attn_mask=None,
                   delta=None):
    _on_q_device("fa.backward", q, dout=dout, k=k, v=v, out=out, lse=lse, dlse=dlse, alibi_slopes=alibi_slopes,
                 sinks=sinks, key_mask=key_mask, attn_mask=attn_mask, delta=delta)
    dsinks = q.new_empty((q.shape[1],) if sinks is not None else (0,), dtype=torch.float32)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), dsinks


@torch.library.register_fake("fa::backward_varlen")
def _backward_varlen_fake(dout, q, k, v, out, lse, dlse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                          scale=None, causal=False, align=0, window_left=-1, window_right=-1, softcap=None,
                          alibi_slopes=None, sinks=None):
    _on_q_device("fa.backward_varlen", q, dout=dout, k=k, v=v, out=out, lse=lse, dlse=dlse, cu_seqlens_q=cu_seqlens_q,
                 cu_seqlens_k=cu_seqlens_k, alibi_slopes=alibi_slopes, sinks=sinks)
    dsinks = q.new_empty((q.shape[1],) if sinks is not None else (0,), dtype=torch.float32)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), dsinks
