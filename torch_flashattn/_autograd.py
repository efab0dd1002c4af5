"""Autograd formulas of the fa:: forward ops (torch.library.register_autograd), through fa::backward
(fa::backward_varlen for packed sequences).

fa::forward saves q, k, v and its output and recomputes lse in the backward pass (one more forward;
torch_flashattn.attention calls fa::forward_lse instead when a gradient is needed); fa::forward_lse,
fa::forward_variants and fa::forward_varlen save their lse. On CUDA fa::backward runs the tensor-core
backward kernels where they take the call (csrc/cuda/sm90_backward.cu on compute capability 9.0,
csrc/cuda/sm80_backward.cu on 8.0+ or where the Hopper kernel declines), else PyTorch's computation.
Gradients flow to q, k, v and sinks; a float attn_mask or ALiBi slopes that require grad raise when
the forward runs (no gradient is computed for them, and a silent zero would be wrong). The gradient
ops have an autograd formula too, which raises: a second derivative (double backward) is not
computed, and without it autograd took their results for constants and gave zeros.
"""
import torch


def _setup_forward(ctx, inputs, output):
    q, k, v, scale, causal = inputs
    ctx.scale, ctx.causal = scale, causal
    ctx.save_for_backward(q, k, v, output)


def _backward_forward(ctx, dout):
    q, k, v, out = ctx.saved_tensors
    lse = torch.ops.fa.forward_lse(q, k, v, ctx.scale, ctx.causal)[1]
    dq, dk, dv, _ = call(torch.ops.fa.backward, dout.contiguous(), q, k, v, out, lse, None, ctx.scale, ctx.causal)
    return dq, dk, dv, None, None


def _setup_forward_lse(ctx, inputs, output):
    q, k, v, scale, causal = inputs
    ctx.scale, ctx.causal = scale, causal
    ctx.save_for_backward(q, k, v, *output)


def _backward_forward_lse(ctx, dout, dlse):
    q, k, v, out, lse = ctx.saved_tensors
    dout = torch.zeros_like(out) if dout is None else dout.contiguous()
    dq, dk, dv, _ = call(torch.ops.fa.backward, dout, q, k, v, out, lse, dlse, ctx.scale, ctx.causal)
    return dq, dk, dv, None, None


def _setup_variants(ctx, inputs, output):
    q, k, v, scale, causal, align, left, right, softcap, alibi_slopes, sinks, key_mask, attn_mask = inputs
    if alibi_slopes is not None and alibi_slopes.requires_grad:
        raise RuntimeError("fa.forward_variants: alibi_slopes has no gradient here; pass alibi_slopes.detach()")
    if attn_mask is not None and attn_mask.requires_grad:
        raise RuntimeError("fa.forward_variants: a float attn_mask has no gradient here; pass attn_mask.detach() "
                           "(or use F.scaled_dot_product_attention for a trainable mask)")
    ctx.args = (scale, causal, align, left, right, softcap)
    ctx.has = tuple(t is not None for t in (alibi_slopes, sinks, key_mask, attn_mask))
    saved = [t for t in (alibi_slopes, sinks, key_mask, attn_mask) if t is not None]
    ctx.save_for_backward(q, k, v, *output, *saved)


def _backward_variants(ctx, dout, dlse):
    q, k, v, out, lse, *saved = ctx.saved_tensors
    it = iter(saved)
    alibi_slopes, sinks, key_mask, attn_mask = (next(it) if h else None for h in ctx.has)
    dout = torch.zeros_like(out) if dout is None else dout.contiguous()
    dq, dk, dv, dsinks = call(torch.ops.fa.backward, dout, q, k, v, out, lse, dlse, *ctx.args, alibi_slopes,
                               sinks, key_mask, attn_mask)
    return dq, dk, dv, None, None, None, None, None, None, None, dsinks if sinks is not None else None, None, None


def _setup_varlen(ctx, inputs, output):
    q, k, v, cu_q, cu_k, max_q, max_k, scale, causal, align, left, right, softcap, alibi_slopes, sinks = inputs
    if alibi_slopes is not None and alibi_slopes.requires_grad:
        raise RuntimeError("fa.forward_varlen: alibi_slopes has no gradient here; pass alibi_slopes.detach()")
    ctx.args = (max_q, max_k, scale, causal, align, left, right, softcap)
    ctx.has = tuple(t is not None for t in (alibi_slopes, sinks))
    ctx.save_for_backward(q, k, v, *output, cu_q, cu_k, *[t for t in (alibi_slopes, sinks) if t is not None])


def _backward_varlen(ctx, dout, dlse):
    q, k, v, out, lse, cu_q, cu_k, *saved = ctx.saved_tensors
    it = iter(saved)
    alibi_slopes, sinks = (next(it) if h else None for h in ctx.has)
    dout = torch.zeros_like(out) if dout is None else dout.contiguous()
    max_q, max_k, *rest = ctx.args
    dq, dk, dv, dsinks = call(torch.ops.fa.backward_varlen, dout, q, k, v, out, lse, dlse, cu_q, cu_k, max_q, max_k,
                               *rest, alibi_slopes, sinks)
    return (dq, dk, dv) + (None,) * 11 + (dsinks if sinks is not None else None,)


torch.library.register_autograd("fa::forward", _backward_forward, setup_context=_setup_forward)
torch.library.register_autograd("fa::forward_lse", _backward_forward_lse, setup_context=_setup_forward_lse)
torch.library.register_autograd("fa::forward_variants", _backward_variants, setup_context=_setup_variants)
torch.library.register_autograd("fa::forward_varlen", _backward_varlen, setup_context=_setup_varlen)


def _no_double_backward(op):
    def backward(ctx, *grads):
        raise RuntimeError(f"{op}: a gradient of the gradients (double backward) is not implemented; for a "
                           "second derivative use F.scaled_dot_product_attention with the math backend")
    return backward


def _setup_nothing(ctx, inputs, output):
    pass


torch.library.register_autograd("fa::backward", _no_double_backward("fa.backward"), setup_context=_setup_nothing)
torch.library.register_autograd("fa::backward_varlen", _no_double_backward("fa.backward_varlen"),
                                setup_context=_setup_nothing)

_BELOW_AUTOGRAD = getattr(torch._C, "_AutoDispatchBelowAutograd", None)
_FUNCTORCH_AD = (torch._C._functorch.TransformType.Grad, torch._C._functorch.TransformType.Jvp)


def _check_transforms(op):
    """torch.func's grad, jacrev and jvp cannot run the registration above (torch's message would not
    name the op); vmap can. Raises under the first two."""
    if torch._C._functorch.peek_interpreter_stack() is None:
        return
    if any(i.key() in _FUNCTORCH_AD for i in torch._C._functorch.get_interpreter_stack() or ()):
        raise RuntimeError(f"{op._qualified_op_name.replace('::', '.')}: torch.func.grad, jacrev and jvp are not supported "
                           "(vmap is); use torch.autograd.grad or .backward(), or F.scaled_dot_product_attention")


def call(op, *args):
    """op(*args). Outside grad mode (inference, generation), dispatched below the autograd key, as the
    registration above does itself for such calls, without its trip through Python first (8-10 µs
    of a call's host time on a 2-core CPU). In grad mode, and while torch.compile traces, op as is
    (under a torch.func transform that needs gradients, a clear error)."""
    if _BELOW_AUTOGRAD is None or torch.is_grad_enabled() or torch.compiler.is_compiling():
        if not torch.compiler.is_compiling():
            _check_transforms(op)
        return op(*args)
    with _BELOW_AUTOGRAD():
        return op(*args)
