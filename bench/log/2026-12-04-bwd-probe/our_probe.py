import sys, torch, torch_flashattn
d, causal, N = int(sys.argv[1]), bool(int(sys.argv[2])), int(sys.argv[3])
B, H = 16384 // N, 2048 // d
q, k, v, do = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16, requires_grad=i < 3) for i in range(4))
out = torch_flashattn.attention(q, k, v, causal=causal)
for _ in range(3):
    torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
torch.cuda.synchronize()
