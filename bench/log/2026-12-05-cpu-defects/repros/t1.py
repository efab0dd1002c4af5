from common import *
import itertools, traceback, time
g=torch.Generator().manual_seed(0)
B,H,Hkv,N,d=2,4,2,24,16
q=r(B,H,N,d,g=g); k=r(B,Hkv,N,d,g=g); v=r(B,Hkv,N,d,g=g)
km=torch.ones(B,N,dtype=torch.bool); km[1,-5:]=False
am=r(1,1,N,N,g=g)
bm=torch.rand(B,1,N,N,generator=g)>0.3
cases={
 "plain": lambda q,k,v: fa.attention(q,k,v),
 "causal": lambda q,k,v: fa.attention(q,k,v,causal=True,scale=0.3),
 "br": lambda q,k,v: fa.attention(q[:,:,:10],k,v,causal=True,causal_align="bottom_right"),
 "window": lambda q,k,v: fa.attention(q,k,v,window=(4,2)),
 "softcap": lambda q,k,v: fa.attention(q,k,v,softcap=2.0,causal=True),
 "alibi": lambda q,k,v: fa.attention(q,k,v,alibi_slopes=torch.linspace(0.1,1,H)),
 "sinks": lambda q,k,v: fa.attention(q,k,v,sinks=torch.linspace(-1,1,H),causal=True),
 "key_mask": lambda q,k,v: fa.attention(q,k,v,key_mask=km),
 "attn_mask_f": lambda q,k,v: fa.attention(q,k,v,attn_mask=am),
 "attn_mask_b": lambda q,k,v: fa.attention(q,k,v,attn_mask=bm),
 "lse": lambda q,k,v: fa.attention_lse(q,k,v,causal=True),
 "lse_var": lambda q,k,v: fa.attention_lse(q,k,v,window=(3,3),softcap=5.0),
 "sdpa": lambda q,k,v: fa.scaled_dot_product_attention(q,k,v,is_causal=True,enable_gqa=True),
 "sdpa_scale": lambda q,k,v: fa.scaled_dot_product_attention(q,k,v,scale=0.1,enable_gqa=True),
 "sdpa_decode": lambda q,k,v: fa.scaled_dot_product_attention(q[:,:,:2],k,v,enable_gqa=True),
 "sdpa_mask": lambda q,k,v: fa.scaled_dot_product_attention(q,k,v,attn_mask=bm,enable_gqa=True),
 "sdpa_3d": lambda q,k,v: fa.scaled_dot_product_attention(q[:,0],k[:,0],v[:,0],is_causal=True),
}
import sys
backends = sys.argv[1].split(",") if len(sys.argv)>1 else ["eager","aot_eager","inductor"]
bad=[]
for name,fn in cases.items():
    ref=fn(q,k,v)
    for be in backends:
        for dyn in (False,True):
            for fg in (True,False):
                torch._dynamo.reset()
                try:
                    c=torch.compile(fn,backend=be,dynamic=dyn,fullgraph=fg)
                    out=c(q,k,v)
                    ok=close(out,ref,1e-5)
                    if not ok: bad.append((name,be,dyn,fg,"MISMATCH",maxdiff(out,ref)))
                except Exception as e:
                    bad.append((name,be,dyn,fg,type(e).__name__,str(e).splitlines()[0][:200]))
    print(name,"done",flush=True)
for b in bad: print(b)
print("n bad",len(bad))
