# attention_kvcache is documented as forward only, but with inputs that require grad it neither raises
# nor detaches: backward() runs and leaves q.grad / k_new.grad / sinks.grad = None (only torch's generic
# "autograd kernel was not registered" UserWarning). forward_variants raises for the analogous case
# (alibi_slopes / attn_mask requiring grad: "a silent zero would be wrong", _autograd.py docstring).
import warnings
import torch, torch_flashattn as fa
torch.manual_seed(0)
q = torch.randn(1, 2, 1, 8, requires_grad=True)
kc, vc = torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)
kn = torch.randn(1, 2, 1, 8, requires_grad=True)
vn = torch.randn(1, 2, 1, 8)
sinks = torch.zeros(2, requires_grad=True)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    out = fa.attention_kvcache(q, kc, vc, k_new=kn, v_new=vn, sinks=sinks)
    print("out.requires_grad:", out.requires_grad)
    out.sum().backward()
print("q.grad:", q.grad, " k_new.grad:", kn.grad, " sinks.grad:", sinks.grad)
# the same attention through fa.attention has non-zero gradients:
q2 = q.detach().clone().requires_grad_()
fa.attention(q2, kc, vc, sinks=sinks.detach(), causal=True, causal_align="bottom_right").sum().backward()
print("fa.attention q.grad max:", q2.grad.abs().max().item())
