# attention_varlen with an empty packed k (total_k == 0) or q (total_q == 0) raises an opaque
# "a data pointer is NULL (status 1)" when max_seqlen_k/_q is larger than the true maximum (0).
# max_seqlen is documented as an upper bound elsewhere (it's accepted when larger on non-empty inputs).
import torch, torch_flashattn as fa
torch.set_num_threads(2)
H,d=2,8
i32=lambda *x: torch.tensor(x,dtype=torch.int32)
cases = {
  "total_k=0, max_k=0":  (torch.randn(1,H,d), torch.randn(0,H,d), torch.randn(0,H,d), i32(0,1), i32(0,0), 1, 0),
  "total_k=0, max_k=4":  (torch.randn(1,H,d), torch.randn(0,H,d), torch.randn(0,H,d), i32(0,1), i32(0,0), 1, 4),
  "total_q=0, max_q=0":  (torch.randn(0,H,d), torch.randn(3,H,d), torch.randn(3,H,d), i32(0,0), i32(0,3), 0, 3),
  "total_q=0, max_q=4":  (torch.randn(0,H,d), torch.randn(3,H,d), torch.randn(3,H,d), i32(0,0), i32(0,3), 4, 3),
  "total_k=2, max_k=9 (non-empty, larger max ok)": (torch.randn(1,H,d), torch.randn(2,H,d), torch.randn(2,H,d), i32(0,1), i32(0,2), 1, 9),
}
for name,(q,k,v,cq,ck,mq,mk) in cases.items():
    try:
        o,l=fa.attention_varlen(q,k,v,cq,ck,mq,mk,return_lse=True); print(name, "-> ok", tuple(o.shape), o.abs().max().item() if o.numel() else "", l.flatten()[:2].tolist())
    except Exception as e: print(name, "-> raises:", e)
