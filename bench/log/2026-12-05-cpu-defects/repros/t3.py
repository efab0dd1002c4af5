from common import *
import sys
be=sys.argv[1]
g=torch.Generator().manual_seed(2)
bad=[]
B,H,Hkv,Nmax,d=2,4,2,16,8
def fresh():
    kc=r(B,Hkv,Nmax,d,g=g); vc=r(B,Hkv,Nmax,d,g=g)
    return kc,vc
def run(name, fn, make_args, dyn, ncalls=3, fg=True):
    torch._dynamo.reset()
    c=torch.compile(fn,backend=be,dynamic=dyn,fullgraph=fg)
    for i in range(ncalls):
        a=make_args(i)
        a2=[x.clone() if isinstance(x,torch.Tensor) else x for x in a]
        try:
            ref=fn(*a); out=c(*a2)
            if not close(out,ref): bad.append((name,dyn,i,"OUT MISMATCH",maxdiff(out,ref)))
            for j,(x,y) in enumerate(zip(a,a2)):
                if isinstance(x,torch.Tensor) and not torch.equal(x,y): bad.append((name,dyn,i,f"ARG{j} state differs",maxdiff(x,y)))
        except Exception as e:
            bad.append((name,dyn,i,type(e).__name__,str(e).splitlines()[0][:300]))
def args_append(i):
    kc,vc=fresh(); q=r(B,H,2,d,g=g); kn=r(B,Hkv,2,d,g=g); vn=r(B,Hkv,2,d,g=g)
    sl=torch.tensor([3+i,7],dtype=torch.int32)
    return q,kc,vc,sl,kn,vn
for dyn in (False,True):
    run("append", lambda q,kc,vc,sl,kn,vn: fa.attention_kvcache(q,kc,vc,cache_seqlens=sl,k_new=kn,v_new=vn,causal=True), args_append, dyn)
    run("append_then_read", lambda q,kc,vc,sl,kn,vn: (fa.attention_kvcache(q,kc,vc,cache_seqlens=sl,k_new=kn,v_new=vn), kc.sum(2), vc*2), args_append, dyn)
    run("read_then_append", lambda q,kc,vc,sl,kn,vn: (kc.sum(2).clone(), fa.attention_kvcache(q,kc,vc,cache_seqlens=sl,k_new=kn,v_new=vn)), args_append, dyn)
    run("append_twice", lambda q,kc,vc,sl,kn,vn: (fa.attention_kvcache(q,kc,vc,cache_seqlens=sl,k_new=kn,v_new=vn), fa.attention_kvcache(q,kc,vc,cache_seqlens=sl+2,k_new=kn*2,v_new=vn*2)), args_append, dyn)
    run("append_variants", lambda q,kc,vc,sl,kn,vn: fa.attention_kvcache(q,kc,vc,cache_seqlens=sl,k_new=kn,v_new=vn,window=(3,0),softcap=2.0,sinks=torch.ones(H),alibi_slopes=torch.ones(H)*0.1), args_append, dyn)
    run("noseqlens", lambda q,kc,vc,sl,kn,vn: fa.attention_kvcache(q,kc,vc,k_new=kn,v_new=vn), args_append, dyn)
    run("noappend", lambda q,kc,vc,sl,kn,vn: fa.attention_kvcache(q,kc,vc,cache_seqlens=sl), args_append, dyn)
    # cache as view of bigger buffer (layer slice)
    def args_view(i):
        buf=r(3,B,Hkv,Nmax,d,g=g); vb=r(3,B,Hkv,Nmax,d,g=g)
        q=r(B,H,1,d,g=g); kn=r(B,Hkv,1,d,g=g); vn=r(B,Hkv,1,d,g=g)
        return q,buf,vb,torch.tensor([i+1,5],dtype=torch.int32),kn,vn
    run("view_layer", lambda q,kb,vb,sl,kn,vn: fa.attention_kvcache(q,kb[1],vb[1],cache_seqlens=sl,k_new=kn,v_new=vn), args_view, dyn)
    run("view_layer_in_loop", lambda q,kb,vb,sl,kn,vn: sum(fa.attention_kvcache(q,kb[l],vb[l],cache_seqlens=sl,k_new=kn+l,v_new=vn) for l in range(3)), args_view, dyn)
    # head-sliced view (non-contiguous cache along a dim other than last)
    def args_hview(i):
        buf=r(B,Nmax,Hkv,d,g=g); vb=r(B,Nmax,Hkv,d,g=g)
        q=r(B,H,1,d,g=g); kn=r(B,Hkv,1,d,g=g); vn=r(B,Hkv,1,d,g=g)
        return q,buf,vb,torch.tensor([i+1,5],dtype=torch.int32),kn,vn
    run("transposed_cache", lambda q,kb,vb,sl,kn,vn: fa.attention_kvcache(q,kb.transpose(1,2),vb.transpose(1,2),cache_seqlens=sl,k_new=kn,v_new=vn), args_hview, dyn)
# module buffer
class M(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.register_buffer("kc",torch.zeros(B,Hkv,Nmax,d)); s.register_buffer("vc",torch.zeros(B,Hkv,Nmax,d))
    def forward(s,q,kn,vn,sl):
        return fa.attention_kvcache(q,s.kc,s.vc,cache_seqlens=sl,k_new=kn,v_new=vn,causal=True)
for dyn in (False,True):
    torch._dynamo.reset()
    m1=M(); m2=M(); c=torch.compile(m2,backend=be,dynamic=dyn,fullgraph=True)
    for step in range(5):
        q=r(B,H,1,d,g=g); kn=r(B,Hkv,1,d,g=g); vn=r(B,Hkv,1,d,g=g); sl=torch.tensor([step,step],dtype=torch.int32)
        try:
            a=m1(q,kn,vn,sl); b=c(q,kn,vn,sl)
            if not close(a,b) or not torch.equal(m1.kc,m2.kc) or not torch.equal(m1.vc,m2.vc): bad.append(("module_buffer",dyn,step,"MISMATCH",maxdiff(a,b),maxdiff(m1.kc,m2.kc)))
        except Exception as e: bad.append(("module_buffer",dyn,step,type(e).__name__,str(e)[:300]))
for b in bad: print(b)
print(be,"n bad",len(bad))
