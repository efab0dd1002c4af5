import sys, torch, torch_flashattn
from bench.attention import time_cpu
torch.manual_seed(0)
B,H,N,d=1,8,1024,64
q,k,v=(torch.randn(B,H,N,d) for _ in range(3))
sl=torch.rand(H)*0.1
bias=torch.randn(1,H,N,N)
res={}
for name,kw in [("dense",{}),("softcap",dict(softcap=30.0)),("softcap causal",dict(softcap=30.0,causal=True)),("alibi",dict(alibi_slopes=sl)),("alibi causal",dict(alibi_slopes=sl,causal=True)),("float mask",dict(attn_mask=bias))]:
    res[name]=time_cpu(lambda: torch_flashattn.attention(q,k,v,**kw),0.5)
qg,kg,vg=(t.clone().requires_grad_() for t in (q,k,v))
g=torch.randn_like(q)
for name,kw in [("bwd dense",{}),("bwd softcap",dict(softcap=30.0)),("bwd alibi causal",dict(alibi_slopes=sl,causal=True))]:
    res[name]=time_cpu(lambda: torch.autograd.grad(torch_flashattn.attention(qg,kg,vg,**kw),(qg,kg,vg),g),0.5)
print(sys.argv[1], " ".join(f"{k}={v:.2f}" for k,v in res.items()), flush=True)
