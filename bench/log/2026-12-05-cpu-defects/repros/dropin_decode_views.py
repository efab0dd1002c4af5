# Drop-in SDPA, decode-shaped call (few queries, more keys, not causal), k and v views of ONE buffer
# (e.g. a stacked KV cache kv[0], kv[1]), torch.compile inductor with dynamic shapes.
import torch, torch_flashattn as fa
torch.set_num_threads(1); torch.manual_seed(0)
S = torch.nn.functional.scaled_dot_product_attention
def f(q, k, v): return fa.scaled_dot_product_attention(q, k, v)
for dyn in (True, None, False):
    torch._dynamo.reset(); cf = torch.compile(f, dynamic=dyn)
    for N in (16, 24, 32):
        q = torch.randn(1, 2, 1, 8); kv = torch.randn(2, 1, 2, N, 8)
        ref = S(q, kv[0], kv[1]); got = cf(q, kv[0], kv[1])
        print(f"dynamic={dyn} N={N}: max|compiled - SDPA| = {(got-ref).abs().max().item():.3e}")
