"""Forward-mode AD through the drop-in: a silent zero (or missing) tangent. PyTorch's SDPA raises
NotImplementedError on the CPU fused kernel, and computes the right tangent with the math backend."""
import torch, torch.func as tf, torch_flashattn
from torch.nn.attention import sdpa_kernel, SDPBackend
q, k, v = (torch.randn(1, 2, 9, 16) for _ in range(3))
t = torch.randn_like(q)
ours = tf.jvp(lambda q: torch_flashattn.scaled_dot_product_attention(q, k, v), (q,), (t,))[1]
with sdpa_kernel(SDPBackend.MATH):
    ref = tf.jvp(lambda q: torch.nn.functional.scaled_dot_product_attention(q, k, v), (q,), (t,))[1]
print("ours jvp |tangent| max:", ours.abs().max().item(), " math SDPA:", ref.abs().max().item())
try:
    tf.jvp(lambda q: torch.nn.functional.scaled_dot_product_attention(q, k, v), (q,), (t,))
except NotImplementedError as e:
    print("default SDPA raises:", str(e)[:80])
