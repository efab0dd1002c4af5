from common import *
import sys
be=sys.argv[1]
g=torch.Generator().manual_seed(3)
bad=[]
B,H,Hkv,N,d=2,4,2,20,8
km=torch.ones(B,N,dtype=torch.bool); km[0,-4:]=False
bm=torch.rand(B,1,N,N,generator=g)>0.3
cases={
 "plain": lambda q,k,v,s: fa.attention(q,k,v),
 "causal": lambda q,k,v,s: fa.attention(q,k,v,causal=True,scale=0.4),
 "br": lambda q,k,v,s: fa.attention(q[:,:,:7],k,v,causal=True,causal_align="bottom_right"),
 "window_softcap": lambda q,k,v,s: fa.attention(q,k,v,window=(3,2),softcap=2.0),
 "sinks": lambda q,k,v,s: fa.attention(q,k,v,sinks=s,causal=True),
 "key_mask": lambda q,k,v,s: fa.attention(q,k,v,key_mask=km),
 "bool_mask": lambda q,k,v,s: fa.attention(q,k,v,attn_mask=bm),
 "lse_both": lambda q,k,v,s: (lambda o,l: o.sum()+l.sum())(*fa.attention_lse(q,k,v,causal=True)),
 "lse_only": lambda q,k,v,s: fa.attention_lse(q,k,v,window=(2,2))[1],
 "sdpa_small": lambda q,k,v,s: fa.scaled_dot_product_attention(q,k,v,is_causal=True,enable_gqa=True),
 "varlen": lambda q,k,v,s: fa.attention_varlen(q.transpose(1,2).reshape(-1,H,d),k.transpose(1,2).reshape(-1,Hkv,d),v.transpose(1,2).reshape(-1,Hkv,d),
      torch.tensor([0,N,2*N],dtype=torch.int32),torch.tensor([0,N,2*N],dtype=torch.int32),N,N,causal=True,sinks=s),
}
def grads(fn, args):
    a=[x.detach().clone().requires_grad_(True) for x in args]
    out=fn(*a)
    if isinstance(out,tuple): out=sum(o.float().sum() for o in out)
    w=torch.linspace(-1,1,out.numel()).reshape(out.shape)
    (out*w).sum().backward()
    return [out.detach()]+[x.grad for x in a]
for dtype in (torch.float32, torch.bfloat16):
  for name,fn in cases.items():
    args=[r(B,H,N,d,g=g,dtype=dtype),r(B,Hkv,N,d,g=g,dtype=dtype),r(B,Hkv,N,d,g=g,dtype=dtype),torch.linspace(-1,1,H)]
    ref=grads(fn,args)
    for dyn in (False,True):
        for fg in (True,False):
            torch._dynamo.reset()
            try:
                c=torch.compile(fn,backend=be,dynamic=dyn,fullgraph=fg)
                got=grads(c,args)
                tol=1e-5 if dtype==torch.float32 else 1e-2
                for i,(x,y) in enumerate(zip(got,ref)):
                    if (x is None)!=(y is None): bad.append((name,dtype,dyn,fg,f"grad{i} None mismatch")); continue
                    if x is not None and not close(x,y,tol): bad.append((name,dtype,dyn,fg,f"out/grad{i}",maxdiff(x,y)))
            except Exception as e:
                bad.append((name,dtype,dyn,fg,type(e).__name__,str(e).splitlines()[0][:300]))
  print(dtype,"done",flush=True)
for b in bad: print(b)
print(be,"n bad",len(bad))
