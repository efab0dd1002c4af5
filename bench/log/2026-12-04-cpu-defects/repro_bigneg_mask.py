# A row whose float attn_mask entries are all a huge *finite* negative (-1e30, or torch.finfo.min as HF builds
# padding masks) — softmax is shift-invariant, so the row is softmax of its scores (exact math), and
# every fp implementation that rounds s + mask to a constant gives the uniform mean of v.
import torch, math, torch.nn.functional as F, torch_flashattn as fa
torch.set_num_threads(2); torch.manual_seed(0)
q=torch.randn(1,1,3,16);k=torch.randn(1,1,5,16);v=torch.randn(1,1,5,16)
for val in [-1e4, -1e20, -1e30, -1e38, torch.finfo(torch.float32).min]:
    m=torch.zeros(3,5); m[1,:]=val
    o,l=fa.attention_lse(q,k,v,attn_mask=m)
    s32=F.scaled_dot_product_attention(q,k,v,attn_mask=m)
    s64=F.scaled_dot_product_attention(q.double(),k.double(),v.double(),attn_mask=m.double())
    print(f"mask row = {val:.3g}: fa row1[:3]={[round(x,4) for x in o[0,0,1,:3].tolist()]} lse={l[0,0,1].item():.4g} | "
          f"sdpa32={[round(x,4) for x in s32[0,0,1,:3].tolist()]} sdpa64={[round(x,4) for x in s64[0,0,1,:3].tolist()]} | max|fa-sdpa64|={(o.double()-s64).abs().max().item():.3g}")
print("softmax-invariant answer (no mask) row1:", [round(x,4) for x in F.scaled_dot_product_attention(q,k,v)[0,0,1,:3].tolist()], " uniform mean of v:", [round(x,4) for x in v[0,0].mean(0)[:3].tolist()])
