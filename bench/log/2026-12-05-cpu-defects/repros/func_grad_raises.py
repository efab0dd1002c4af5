"""torch.func.grad through the drop-in's gradient path (bf16, or fp32 with >= 4096 key elements)
raises; PyTorch's SDPA computes it."""
import torch, torch.func as tf, torch_flashattn
sdpa = torch_flashattn.sdpa._torch_sdpa
q, k, v = (torch.randn(1, 2, 80, 64) for _ in range(3))      # fp32, 80*64 key elements
print("SDPA ok:", tf.grad(lambda q: sdpa(q, k, v).sum())(q).shape)
try:
    tf.grad(lambda q: torch_flashattn.scaled_dot_product_attention(q, k, v).sum())(q)
except RuntimeError as e:
    print("drop-in RAISES:", str(e)[:120])
