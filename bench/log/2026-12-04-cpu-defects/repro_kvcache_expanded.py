# attention_kvcache writes k_new/v_new in place into a cache that is an expanded view (batch stride 0):
# the batches' writes collide silently (PyTorch's in-place ops refuse such "internal overlap").
import torch, torch_flashattn as fa
from ref import ref_attn
torch.set_num_threads(2); torch.manual_seed(0)
B,H,Nmax,d=2,1,4,8
base_k=torch.randn(1,H,Nmax,d); base_v=torch.randn(1,H,Nmax,d)
kc=base_k.expand(B,H,Nmax,d); vc=base_v.expand(B,H,Nmax,d)
q=torch.randn(B,H,1,d); kn=torch.randn(B,H,1,d); vn=torch.randn(B,H,1,d)
o=fa.attention_kvcache(q,kc,vc,k_new=kn,v_new=vn,cache_seqlens=torch.tensor([3,3],dtype=torch.int32))
# what a user would expect: each batch sees the shared prefix + its own new token
for b in range(B):
    k=torch.cat([base_k[0,:,:3],kn[b]],1)[None]; v=torch.cat([base_v[0,:,:3],vn[b]],1)[None]
    r,_=ref_attn(q[b:b+1],k,v)
    print(f"b={b}: max |fa - expected| = {(o[b:b+1].double()-r).abs().max().item():.3g}")
try:
    kc.index_copy_(2, torch.tensor([3]), kn)
except Exception as e: print("torch in-place on same view:", str(e)[:120])
