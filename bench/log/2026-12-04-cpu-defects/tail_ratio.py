import torch, statistics, sys, torch.nn.functional as F, torch_flashattn as fa
from torch.nn.attention import sdpa_kernel, SDPBackend
torch.set_num_threads(2)
mask = sys.argv[1]=="mask"; scale=float(sys.argv[2]); d=int(sys.argv[3])
ratios=[]
for seed in range(60):
    torch.manual_seed(seed)
    q=torch.randn(1,6,5,d);k=torch.randn(1,2,40,d);v=torch.randn(1,2,40,d);do=torch.randn(1,6,5,d); m=torch.randn(5,40) if mask else None
    g={}
    for tag in ["fa","math","64"]:
        qq=q.clone().to(torch.float64 if tag=="64" else torch.float32).requires_grad_(); kk=k.to(qq.dtype); vv=v.to(qq.dtype); mm=None if m is None else m.to(qq.dtype)
        if tag=="fa": o=fa.attention(qq,kk,vv,attn_mask=m,scale=scale)
        else:
            with sdpa_kernel(SDPBackend.MATH): o=F.scaled_dot_product_attention(qq,kk,vv,attn_mask=mm,scale=scale,enable_gqa=True)
        o.backward(do.to(o.dtype)); g[tag]=qq.grad.double()
    ratios.append(((g["fa"]-g["64"]).abs().max()/(g["math"]-g["64"]).abs().max()).item())
ratios.sort(); print(sys.argv[1:], "median", round(statistics.median(ratios),2), "p90", round(ratios[int(.9*len(ratios))],2), "max", round(ratios[-1],2))
