import torch, torch.nn.functional as F, torch_flashattn as fa
from ref import ref_attn
torch.set_num_threads(2); torch.manual_seed(0)
q=torch.randn(1,1,3,8);k=torch.randn(1,1,5,8);v=torch.randn(1,1,5,8)
for sc in [1e37,1e38,3e38]:
    o,l=fa.attention_lse(q,k,v,scale=sc); r,rl=ref_attn(q,k,v,scale=sc)
    s=F.scaled_dot_product_attention(q,k,v,scale=sc)
    print(sc, "fa", o[0,0,:,0].tolist(), l[0,0].tolist(), "\n   ref", r[0,0,:,0].tolist(), rl[0,0].tolist(), "\n   sdpa32", s[0,0,:,0].tolist())
