"""FA4's backward at one shape: run it (compiling and dumping its cubin), optionally under ncu."""
import sys, torch
from flash_attn.cute.interface import flash_attn_func
d, causal, N = int(sys.argv[1]), bool(int(sys.argv[2])), int(sys.argv[3])
B, H = 16384 // N, 2048 // d
q, k, v, do = (torch.randn(B, N, H, d, device="cuda", dtype=torch.bfloat16, requires_grad=i < 3) for i in range(4))
out = flash_attn_func(q, k, v, causal=causal)
out = out[0] if isinstance(out, tuple) else out
for _ in range(3):
    torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
torch.cuda.synchronize()
