# attention_kvcache: k_new that is a (non-dense) view of k_cache itself is accepted, and the in-place
# append then reads rows it has already overwritten.
import torch, torch_flashattn
torch.manual_seed(0)
B, H, Nmax, d = 1, 2, 8, 4
kc = torch.randn(B, H, Nmax, d); vc = torch.randn(B, H, Nmax, d)
kn = kc[:, :, 0:3]                    # rows 0..2 of the cache, a non-dense view (sliced along N)
vn = torch.randn(B, H, 3, d)
expected = kc.clone(); expected[:, :, 1:4] = kc[:, :, 0:3].clone()   # append semantics: rows 1..3 <- old rows 0..2
q = torch.randn(B, H, 1, d)
torch_flashattn.attention_kvcache(q, kc, vc, cache_seqlens=torch.tensor([1], dtype=torch.int32), k_new=kn, v_new=vn)
print("raised: no")
print("k_cache as the append semantics say:", torch.equal(kc, expected))
print("row 2 got old row", "0" if torch.equal(kc[:, :, 2], expected[:, :, 1]) else "1 (ok)", "; row 3 equals expected:", torch.equal(kc[:, :, 3], expected[:, :, 3]))
# the same overlap as a dense view is refused:
try:
    kc2 = torch.randn(B, H, Nmax, d)
    torch_flashattn.attention_kvcache(q, kc2, vc.clone(), cache_seqlens=torch.tensor([1], dtype=torch.int32),
                                      k_new=kc2.view(B * H * Nmax * d)[:B * H * 3 * d].view(B, H, 3, d), v_new=vn)
    print("dense overlap: no error")
except RuntimeError as e:
    print("dense overlap raises:", str(e)[:120])
