from common import *
import torch.autograd.forward_ad as fwad
from torch.func import grad, jvp, vmap, jacrev
torch.manual_seed(0)
q=torch.randn(1,2,8,8); k=torch.randn(1,2,8,8); v=torch.randn(1,2,8,8)
def f_fa(q): return fa.attention(q,k,v,causal=True).sum()
def f_sd(q): return fa.scaled_dot_product_attention(q,k,v,is_causal=True).sum()
def f_ref(q): return F.scaled_dot_product_attention(q,k,v,is_causal=True).sum()
def rep(name, thunk, ref=None):
    torch._dynamo.reset()
    try:
        out=thunk()
        msg = "OK" if ref is None else ("MATCH" if close(out,ref,1e-5) else f"MISMATCH {maxdiff(out,ref):.3g}")
        print(f"{name:50s} {msg}")
    except Exception as e:
        print(f"{name:50s} {type(e).__name__}: {' | '.join(l for l in str(e).splitlines() if l.strip())[:600]}")
gref=grad(f_ref)(q)
for be in ("eager","aot_eager","inductor"):
    print("== backend",be)
    rep("grad(compile(fa.attention))", lambda: grad(torch.compile(f_fa,backend=be))(q), gref)
    rep("grad(compile(drop-in))", lambda: grad(torch.compile(f_sd,backend=be))(q), gref)
    rep("compile(grad(fa.attention))", lambda: torch.compile(grad(f_fa),backend=be)(q), gref)
    rep("compile(grad(drop-in))", lambda: torch.compile(grad(f_sd),backend=be)(q), gref)
    t=torch.randn_like(q)
    from torch.nn.attention import sdpa_kernel, SDPBackend
    with sdpa_kernel(SDPBackend.MATH): jref=jvp(f_ref,(q,),(t,))[1]
    rep("jvp(compile(drop-in))", lambda: jvp(torch.compile(f_sd,backend=be),(q,),(t,))[1], jref)
    rep("compile(jvp(drop-in))", lambda: torch.compile(lambda q,t: jvp(f_sd,(q,),(t,))[1],backend=be)(q,t), jref)
    def fwd(fn):
        with fwad.dual_level():
            d=fwad.make_dual(q,t); return fwad.unpack_dual(fn(d)).tangent
    rep("fwd-AD dual through compile(drop-in)", lambda: fwd(torch.compile(f_sd,backend=be)), jref)
    rep("fwd-AD dual through compile(fa.attention)", lambda: fwd(torch.compile(f_fa,backend=be)), jref)
    vref=vmap(lambda qq: F.scaled_dot_product_attention(qq,k,v))(torch.randn(3,1,2,8,8, generator=torch.Generator().manual_seed(1)))
    qq=torch.randn(3,1,2,8,8, generator=torch.Generator().manual_seed(1))
    rep("vmap(compile(fa.attention))", lambda: vmap(torch.compile(lambda x: fa.attention(x,k,v),backend=be))(qq), vref)
    rep("compile(vmap(drop-in))", lambda: torch.compile(vmap(lambda x: fa.scaled_dot_product_attention(x,k,v)),backend=be)(qq), vref)
print("eager reference behaviour:")
rep("grad(fa.attention) eager", lambda: grad(f_fa)(q), gref)
rep("grad(drop-in) eager", lambda: grad(f_sd)(q), gref)
rep("jvp(drop-in) eager", lambda: jvp(f_sd,(q,),(t,))[1], jref)
