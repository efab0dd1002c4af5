# attn_mask with an empty dimension (B=0, Nq=0 or Nk=0): SDPA returns empty / zero results; fa raises an opaque status-16 error
import torch, torch.nn.functional as F, torch_flashattn as fa
torch.set_num_threads(2)
for (B,Nq,Nk) in [(0,4,5),(1,0,5),(1,4,0)]:
    q=torch.randn(B,2,Nq,8);k=torch.randn(B,2,Nk,8);v=torch.randn(B,2,Nk,8)
    for m in [torch.zeros(B,2,Nq,Nk), torch.ones(B,2,Nq,Nk,dtype=torch.bool)]:
        try:
            ref=F.scaled_dot_product_attention(q,k,v,attn_mask=m); r=f"sdpa ok {tuple(ref.shape)}"
        except Exception as e: r=f"sdpa raises {e}"
        try:
            o=fa.attention(q,k,v,attn_mask=m); print((B,Nq,Nk), m.dtype, "fa ok", tuple(o.shape), o.abs().max() if o.numel() else '', "|", r)
        except Exception as e: print((B,Nq,Nk), m.dtype, "fa raises:", e, "|", r)
    # also without attn_mask but with key_mask/window for comparison
    try: o=fa.attention(q,k,v,key_mask=torch.ones(B,Nk,dtype=torch.bool)); print("  key_mask ok", tuple(o.shape))
    except Exception as e: print("  key_mask raises", e)
