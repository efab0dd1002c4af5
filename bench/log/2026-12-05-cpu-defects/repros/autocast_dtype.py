"""Under autocast SDPA runs (and returns) the autocast dtype; the drop-in runs fp32 and returns fp32
(fa:: ops have no Autocast registration). On CUDA that is also the slow fp32 path."""
import torch, torch_flashattn
sdpa = torch_flashattn.sdpa._torch_sdpa
q, k, v = (torch.randn(1, 2, 9, 16) for _ in range(3))
with torch.autocast("cpu", dtype=torch.bfloat16):
    print("SDPA:", sdpa(q, k, v).dtype, " drop-in:", torch_flashattn.scaled_dot_product_attention(q, k, v).dtype)
