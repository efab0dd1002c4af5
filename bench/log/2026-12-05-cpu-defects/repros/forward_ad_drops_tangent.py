# Forward-mode AD (torch.func.jvp / jacfwd / torch.autograd.forward_ad) through the fa ops silently
# gives a zero / missing tangent instead of raising. PyTorch's SDPA raises NotImplementedError there.
import torch, torch_flashattn as fa
import torch.nn.functional as F
import torch.autograd.forward_ad as fwAD
torch.manual_seed(0)
q, k, v = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)
t = torch.randn_like(q)
dense = lambda q: torch.softmax(q @ k.transpose(-1, -2) / 8 ** 0.5, -1) @ v     # same math, plain ops
_, tan_ref = torch.func.jvp(dense, (q,), (t,))
_, tan_fa = torch.func.jvp(lambda q: fa.attention(q, k, v), (q,), (t,))
_, tan_var = torch.func.jvp(lambda q: fa.attention(q, k, v, softcap=30.0), (q,), (t,))
print("jvp |tangent| max: plain ops", tan_ref.abs().max().item(), "| fa.attention", tan_fa.abs().max().item(),
      "| fa.attention(softcap)", tan_var.abs().max().item())
print("jacfwd all zero:", bool((torch.func.jacfwd(lambda q: fa.attention(q, k, v))(q) == 0).all()))
try:
    torch.func.jvp(lambda q: F.scaled_dot_product_attention(q, k, v), (q,), (t,))
except NotImplementedError as e:
    print("SDPA raises:", str(e).splitlines()[0][:90])
with fwAD.dual_level():
    out = fa.attention(fwAD.make_dual(q, t), k, v)
    print("forward_ad tangent of fa.attention:", fwAD.unpack_dual(out).tangent)        # None, no error
    out = fa.attention_varlen(fwAD.make_dual(q[0].transpose(0, 1), t[0].transpose(0, 1)), k[0].transpose(0, 1),
                              v[0].transpose(0, 1), torch.tensor([0, 5], dtype=torch.int32),
                              torch.tensor([0, 6], dtype=torch.int32), 5, 6)
    print("forward_ad tangent of fa.attention_varlen:", fwAD.unpack_dual(out).tangent)
    with fa.patch_sdpa():
        out = F.scaled_dot_product_attention(fwAD.make_dual(q, t), k, v)
    print("forward_ad tangent through patch_sdpa():", fwAD.unpack_dual(out).tangent)
