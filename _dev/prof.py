import torch, torch_flashattn
torch.manual_seed(0)
B, H, N, d = 4, 16, 4096, 128
q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16).requires_grad_(True) for _ in range(3))
dout = torch.randn_like(q)
km = torch.ones(B, N, dtype=torch.bool, device="cuda")
for kw in ({}, dict(key_mask=km), dict(softcap=30.0)):
    out = torch_flashattn.attention(q, k, v, **kw)
    torch.autograd.grad(out, (q, k, v), dout)
torch.cuda.synchronize()
