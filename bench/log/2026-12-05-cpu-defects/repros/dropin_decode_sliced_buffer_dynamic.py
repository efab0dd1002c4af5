import torch, torch_flashattn as fa
torch.set_num_threads(1); torch.manual_seed(0)
S = torch.nn.functional.scaled_dot_product_attention
def f(q, kv, L): return fa.scaled_dot_product_attention(q, kv[0, :, :, :L], kv[1, :, :, :L])
for dyn in (True, False):
    torch._dynamo.reset(); cf = torch.compile(f, dynamic=dyn)
    for N in (16, 24):
        q = torch.randn(1, 2, 1, 8); kv = torch.randn(2, 1, 2, 32, 8)
        try: print(dyn, N, "%.2e" % (cf(q, kv, N) - S(q, kv[0,:,:,:N], kv[1,:,:,:N])).abs().max().item())
        except Exception as e: print(dyn, N, "ERR", repr(e)[:200])
