import torch, timeit, torch_flashattn as t, sys
torch.set_num_threads(1)
q=torch.randn(1,2,1,16); k=torch.randn(1,1,8,16); v=torch.randn(1,1,8,16)
qq=torch.randn(1,2,64,16)
n=20000
with torch.no_grad():
    for name,f in [("decode", lambda: t.scaled_dot_product_attention(q,k,v,enable_gqa=True)), ("prefill", lambda: t.scaled_dot_product_attention(qq,k,v,enable_gqa=True,is_causal=True)), ("op", lambda: torch.ops.fa.forward(qq,k,v,None,True))]:
        print(sys.argv[1], f"{name:10s} {min(timeit.repeat(f, number=n, repeat=5))/n*1e6:.2f} us")
