# attention_kvcache appending into a view of a larger buffer (one layer of a stacked KV cache),
# compiled with inductor and dynamic=True: the append lands in layer 0 instead of layer 1 and the
# output attends the wrong keys. eager / aot_eager / inductor dynamic=False are right.
import torch, torch_flashattn as fa
torch.set_num_threads(1)
torch.manual_seed(0)
B, Hkv, Nmax, d = 1, 1, 4, 2
def step(q, kb, vb, sl, kn, vn):
    return fa.attention_kvcache(q, kb[1], vb[1], cache_seqlens=sl, k_new=kn, v_new=vn)
kb, vb = torch.randn(2, B, Hkv, Nmax, d), torch.randn(2, B, Hkv, Nmax, d)
q, kn, vn = torch.randn(B, Hkv, 1, d), torch.ones(B, Hkv, 1, d), torch.ones(B, Hkv, 1, d)
sl = torch.tensor([2], dtype=torch.int32)
for dynamic in (False, True):
    torch._dynamo.reset()
    kb1, vb1, kb2, vb2 = kb.clone(), vb.clone(), kb.clone(), vb.clone()
    ref = step(q, kb1, vb1, sl, kn, vn)
    out = torch.compile(step, backend="inductor", dynamic=dynamic, fullgraph=True)(q, kb2, vb2, sl, kn, vn)
    print(f"dynamic={dynamic}: out max|diff| = {(out - ref).abs().max().item():.3g}, "
          f"k buffer equal = {torch.equal(kb1, kb2)}, v buffer equal = {torch.equal(vb1, vb2)}")
    if not torch.equal(kb1, kb2):
        print("  eager    k[:, 0, 0, :, 0] (layer x row):", kb1[:, 0, 0, :, 0].tolist())
        print("  compiled k[:, 0, 0, :, 0] (layer x row):", kb2[:, 0, 0, :, 0].tolist())
