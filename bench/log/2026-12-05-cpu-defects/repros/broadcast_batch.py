"""SDPA broadcasts batch (and v's head) dims; the drop-in sends such calls to fa::forward, which raises."""
import torch, torch.nn.functional as F, torch_flashattn
sdpa = torch_flashattn.sdpa._torch_sdpa
cases = {
    "3-D, q batch 1, k/v batch 2": (torch.randn(1, 5, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 8)),
    "3-D, q batch 2, k/v batch 1": (torch.randn(2, 5, 8), torch.randn(1, 6, 8), torch.randn(1, 6, 8)),
    "4-D, v batch 1":             (torch.randn(2, 2, 5, 8), torch.randn(2, 2, 6, 8), torch.randn(1, 2, 6, 8)),
    "4-D, v heads 1":             (torch.randn(2, 2, 5, 8), torch.randn(2, 2, 6, 8), torch.randn(2, 1, 6, 8)),
}
for name, (q, k, v) in cases.items():
    ref = sdpa(q, k, v)                                   # PyTorch: fine (broadcasts)
    try:
        with torch_flashattn.patch_sdpa():
            out = F.scaled_dot_product_attention(q, k, v)
        print(name, "ok", (out - ref).abs().max().item())
    except RuntimeError as e:
        print(name, "-> drop-in RAISES:", str(e)[:110], "| SDPA shape", tuple(ref.shape))
