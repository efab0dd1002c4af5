# Double backward through fa.attention silently returns wrong second derivatives (zeros),
# with only a deprecation UserWarning; torch's SDPA gives the correct value.
import torch, warnings, torch.nn.functional as F, torch_flashattn as fa
torch.set_num_threads(2); torch.manual_seed(0)
q=torch.randn(1,2,4,8,requires_grad=True);k=torch.randn(1,2,4,8,requires_grad=True);v=torch.randn(1,2,4,8,requires_grad=True)
def second(fn, dt):
    qq,kk,vv=[t.detach().to(dt).requires_grad_() for t in (q,k,v)]
    o=fn(qq,kk,vv)
    g,=torch.autograd.grad(o.sum(),qq,create_graph=True)
    gg,=torch.autograd.grad(g.pow(2).sum(),kk)
    return gg
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    a=second(lambda q,k,v: fa.attention(q,k,v), torch.float32)
    b=second(lambda q,k,v: fa.attention(q,k,v,window=(1,1)), torch.float32)
    c=second(lambda q,k,v: fa.attention_lse(q,k,v)[1].unsqueeze(-1)*v.mean(), torch.float32) if False else None
print("warnings:", [str(x.message)[:80] for x in w])
from torch.nn.attention import sdpa_kernel, SDPBackend
with sdpa_kernel(SDPBackend.MATH): r=second(lambda q,k,v: F.scaled_dot_product_attention(q,k,v), torch.float64)
try: second(lambda q,k,v: F.scaled_dot_product_attention(q,k,v), torch.float32); print("sdpa fused fp32: ok")
except Exception as e: print("torch SDPA fused CPU backend raises clearly:", str(e)[:100])
from ref import ref_attn
rb=second(lambda q,k,v: ref_attn(q,k,v,window=(1,1))[0], torch.float64)
print("d/dk |d(sum o)/dq|^2 : fa plain max|.| =", a.abs().max().item(), " SDPA fp64 =", r.abs().max().item(), " max diff", (a.double()-r).abs().max().item())
print("with window variant  : fa max|.| =", b.abs().max().item(), " ref fp64 =", rb.abs().max().item())
