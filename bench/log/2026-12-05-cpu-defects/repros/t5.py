from common import *
import sys, torch.nn as nn
from torch.nn.attention import sdpa_kernel, SDPBackend
be=sys.argv[1]
torch.manual_seed(0)
bad=[]
E,Hh,L=32,4,20
class GPTBlock(nn.Module):
    def __init__(s, p=0.0):
        super().__init__(); s.ln1=nn.LayerNorm(E); s.qkv=nn.Linear(E,3*E); s.proj=nn.Linear(E,E); s.ln2=nn.LayerNorm(E); s.mlp=nn.Sequential(nn.Linear(E,4*E),nn.GELU(),nn.Linear(4*E,E)); s.p=p
    def forward(s,x,mask=None):
        B,T,_=x.shape
        q,k,v=s.qkv(s.ln1(x)).split(E,2)
        q,k,v=(t.view(B,T,Hh,E//Hh).transpose(1,2) for t in (q,k,v))
        y=F.scaled_dot_product_attention(q,k,v,attn_mask=mask,is_causal=mask is None,dropout_p=s.p if s.training else 0.0)
        x=x+s.proj(y.transpose(1,2).reshape(B,T,E))
        return x+s.mlp(s.ln2(x))
def run(name, model, inputs, dyn, fg, train=False, grad=False, ctx=None):
    getattr(model,'train',lambda t: None)(train)
    torch._dynamo.reset()
    import contextlib
    ctx = ctx or contextlib.nullcontext
    try:
        with ctx(), (torch.enable_grad() if grad else torch.no_grad()):
            torch.manual_seed(5); ref_sdpa = model(*inputs)       # pytorch SDPA, unpatched
            with fa.patch_sdpa():
                fa.reset_stats()
                torch.manual_seed(5); ref_eager = model(*inputs); st_e=fa.stats()
                fa.reset_stats()
                c=torch.compile(model,backend=be,dynamic=dyn,fullgraph=fg)
                torch.manual_seed(5); out=c(*inputs); st_c=fa.stats()
                fa.reset_stats()
                torch.manual_seed(5); out2=c(*inputs); st_c2=fa.stats()
        o = out[0] if isinstance(out,tuple) else out
        r1 = ref_eager[0] if isinstance(ref_eager,tuple) else ref_eager
        r0 = ref_sdpa[0] if isinstance(ref_sdpa,tuple) else ref_sdpa
        okc=close(o,r1,1e-5); oks=close(o,r0,1e-4)
        print(f"{name:28s} dyn={dyn} fg={fg} compiled~eager:{okc} ({maxdiff(o,r1):.2e}) compiled~sdpa:{oks} ({maxdiff(o,r0):.2e}) eager stats={ {k:v for k,v in st_e.items() if v} } compiled stats 1st={ {k:v for k,v in st_c.items() if v} } 2nd={ {k:v for k,v in st_c2.items() if v} }")
        if grad:
            pass
    except Exception as e:
        print(f"{name:28s} dyn={dyn} fg={fg} ERROR {type(e).__name__}: {str(e).splitlines()[0][:300]}")
x=torch.randn(2,L,E)
blk=GPTBlock(); blkd=GPTBlock(p=0.3)
mha=nn.MultiheadAttention(E,Hh,batch_first=True).eval()
cm=torch.ones(L,L,dtype=torch.bool).tril()
xl=torch.randn(1,520,E)
for dyn in (False,True):
  for fg in (True,False):
    run("gpt_block", blk, (x,), dyn, fg)
    run("gpt_block_grad_fewkeys", blk, (x,), dyn, fg, grad=True)
    run("gpt_block_grad_manykeys", blk, (xl,), dyn, fg, grad=True)
    run("gpt_dropout_train", blkd, (x,), dyn, fg, train=True)
    run("mha_noweights", lambda a: mha(a,a,a,need_weights=False), (x,), dyn, fg)
    run("mha_causal_mask", lambda a: mha(a,a,a,need_weights=False,attn_mask=~cm,is_causal=True), (x,), dyn, fg)
    run("gpt_attn_mask_cpu", blk, (x, cm), dyn, fg)
    run("gpt_sdpa_kernel_math", blk, (x,), dyn, fg, ctx=lambda: sdpa_kernel(SDPBackend.MATH))
