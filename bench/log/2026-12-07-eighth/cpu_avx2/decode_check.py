# Decoding steps (and two few-row blocks) on the C backend: torch.ops.fa.forward against SDPA on the CPU,
# 20 calls each after one warm-up (ms), and every output saved to ARGV[1] for a bit-for-bit comparison
# between two builds (torch.equal). python3 decode_check.py out.pt
import sys, torch, time, torch_flashattn, torch.nn.functional as F
torch.manual_seed(0)
outs = []
for (B, H, nq, N, d) in ((4, 8, 1, 4096, 64), (2, 8, 3, 1000, 128), (1, 4, 5, 777, 40), (2, 8, 1, 16384, 64)):
    q=torch.randn(B,H,nq,d); k=torch.randn(B,H,N,d); v=torch.randn(B,H,N,d)
    outs.append(torch.ops.fa.forward(q,k,v))
    if nq == 1:
        for name,f in (('fa',lambda: torch.ops.fa.forward(q,k,v)),('sdpa',lambda: F.scaled_dot_product_attention(q,k,v))):
            f(); t=time.perf_counter(); n=20
            for _ in range(n): f()
            print(N, d, name, round((time.perf_counter()-t)/n*1e3,3),'ms')
torch.save(outs, sys.argv[1])
