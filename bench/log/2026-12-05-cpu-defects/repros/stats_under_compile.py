# stats() under torch.compile: calls inside compiled graphs are never counted (sdpa.py:206 returns early
# while compiling; the compiled graph holds only the op), so a compiled model reports zero calls.
import torch, torch.nn.functional as F, torch_flashattn as fa
from torch.nn.attention import sdpa_kernel, SDPBackend
torch.set_num_threads(1)
q = k = v = torch.randn(1, 2, 8, 8)
f = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
with torch.no_grad(), fa.patch_sdpa():
    f(q, k, v); print("eager   :", fa.stats()); fa.reset_stats()
    c = torch.compile(f, fullgraph=True)
    for _ in range(3): c(q, k, v)
    print("compiled:", fa.stats()); fa.reset_stats()
    # sdpa_kernel without FLASH: eager goes to PyTorch SDPA (README), compiled runs fa.forward
    with sdpa_kernel(SDPBackend.MATH):
        f(q, k, v); print("sdpa_kernel(MATH) eager:", fa.stats()["fallback_reasons"])
        torch._dynamo.reset()
        gm = []
        torch.compile(f, backend=lambda g, ex: (gm.append(g), g.forward)[1], fullgraph=True)(q, k, v)
        print("sdpa_kernel(MATH) compiled graph calls:", [str(n.target) for n in gm[0].graph.nodes if n.op == "call_function"])
    q2 = torch.randn(1, 2, 8, 8)
    out = torch.compile(lambda q: fa.attention(q, k, v), mode="reduce-overhead")(q2)
    print("reduce-overhead on CPU:", torch.allclose(out, fa.attention(q2, k, v)))
