import torch, torch_flashattn as fa
torch.set_num_threads(2)
H,d=2,8
i32=lambda *x: torch.tensor(x,dtype=torch.int32)
for trial in range(3):
    q=torch.randn(6,H,d,requires_grad=True);k=torch.randn(7,H,d,requires_grad=True);v=torch.randn(7,H,d,requires_grad=True)
    o,l=fa.attention_varlen(q,k,v,i32(0,2,4),i32(0,3,5),2,3,return_lse=True)
    print("out rows past end:", o[4:,0,:3].tolist(), "lse", l[0,4:].tolist())
    o.sum().backward()
    print("dq rows past end:", q.grad[4:,0,:3].tolist(), "dk rows past end", k.grad[5:,0,:3].tolist())
