from common import *
import torch.autograd.forward_ad as fwad
from torch.func import grad, jvp
from torch.nn.attention import sdpa_kernel, SDPBackend
torch.manual_seed(0)
N=600; d=8
q=torch.randn(1,1,N,d); k=torch.randn(1,1,N,d); v=torch.randn(1,1,N,d)
def f_sd(q): return fa.scaled_dot_product_attention(q,k,v,is_causal=True).sum()
def f_ref(q): return F.scaled_dot_product_attention(q,k,v,is_causal=True).sum()
def f_fa(q): return fa.attention(q,k,v,causal=True).sum()
def rep(name, thunk, ref=None):
    torch._dynamo.reset()
    try:
        out=thunk()
        msg = "OK" if ref is None else ("MATCH" if close(out,ref,1e-5) else f"MISMATCH {maxdiff(out,ref):.3g}")
        print(f"{name:50s} {msg}")
    except Exception as e:
        print(f"{name:50s} {type(e).__name__}: {' | '.join(l for l in str(e).splitlines() if l.strip())[:400]}")
gref=grad(f_ref)(q)
t=torch.randn_like(q)
with sdpa_kernel(SDPBackend.MATH): jref=jvp(f_ref,(q,),(t,))[1]
rep("eager grad(drop-in)", lambda: grad(f_sd)(q), gref)
with sdpa_kernel(SDPBackend.MATH): rep("eager jvp(drop-in) in sdpa_kernel(MATH)", lambda: jvp(f_sd,(q,),(t,))[1], jref)
for be in ("eager","aot_eager","inductor"):
    print("== backend",be)
    rep("grad(compile(drop-in))", lambda: grad(torch.compile(f_sd,backend=be))(q), gref)
    rep("compile(grad(drop-in))", lambda: torch.compile(grad(f_sd),backend=be)(q), gref)
    with sdpa_kernel(SDPBackend.MATH):
        rep("jvp(compile(drop-in)) in sdpa_kernel(MATH)", lambda: jvp(torch.compile(f_sd,backend=be),(q,),(t,))[1], jref)
        rep("compile(jvp(drop-in)) in sdpa_kernel(MATH)", lambda: torch.compile(lambda q,t: jvp(f_sd,(q,),(t,))[1],backend=be)(q,t), jref)
        def fwd(fn):
            with fwad.dual_level():
                dq=fwad.make_dual(q,t); return fwad.unpack_dual(fn(dq)).tangent
        rep("fwd-AD dual, compile(drop-in), MATH", lambda: fwd(torch.compile(f_sd,backend=be)), jref)
    def fwd(fn):
        with fwad.dual_level():
            dq=fwad.make_dual(q,t); return fwad.unpack_dual(fn(dq)).tangent
    rep("fwd-AD dual, compile(fa.attention)", lambda: fwd(torch.compile(f_fa,backend=be)), jref)
def fwd(fn):
    with fwad.dual_level():
        dq=fwad.make_dual(q,t); return fwad.unpack_dual(fn(dq)).tangent
rep("fwd-AD dual, eager fa.attention", lambda: fwd(f_fa), jref)
