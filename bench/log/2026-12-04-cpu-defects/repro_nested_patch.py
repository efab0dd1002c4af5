import torch.nn.functional as F, torch_flashattn as fa
with fa.patch_sdpa():
    with fa.patch_sdpa():
        pass
    print("still inside outer patch_sdpa(); F.sdpa is the drop-in:", F.scaled_dot_product_attention is fa.scaled_dot_product_attention, "(expected True)")
