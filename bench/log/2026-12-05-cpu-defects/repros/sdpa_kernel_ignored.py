"""The drop-in ignores torch.nn.attention.sdpa_kernel: (a) under SDPBackend.MATH, SDPA gives a
double backward; the drop-in raises, with a message that recommends exactly this call; (b) with only
backends that cannot run, SDPA raises, the drop-in computes."""
import torch, torch.nn.functional as F, torch_flashattn
from torch.nn.attention import sdpa_kernel, SDPBackend
q, k, v = (torch.randn(1, 2, 80, 64) for _ in range(3))
for patched in (False, True):
    qq = q.clone().requires_grad_()
    try:
        with sdpa_kernel(SDPBackend.MATH), (torch_flashattn.patch_sdpa() if patched else torch.enable_grad()):
            g, = torch.autograd.grad(F.scaled_dot_product_attention(qq, k, v).pow(2).sum(), qq, create_graph=True)
            h, = torch.autograd.grad(g.sum(), qq)
        print("patched" if patched else "SDPA   ", "double backward ok", h.abs().max().item())
    except RuntimeError as e:
        print("patched" if patched else "SDPA   ", "RAISES:", str(e)[:150])
for patched in (False, True):
    try:
        with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION), (torch_flashattn.patch_sdpa() if patched else torch.no_grad()):
            F.scaled_dot_product_attention(q, k, v)
        print("patched" if patched else "SDPA   ", "EFFICIENT_ATTENTION on CPU: computed")
    except RuntimeError as e:
        print("patched" if patched else "SDPA   ", "EFFICIENT_ATTENTION on CPU: RAISES", str(e)[:60])
