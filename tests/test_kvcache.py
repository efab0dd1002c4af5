"""fa.forward_kvcache (CPU): attention over a KV cache with ragged lengths, in-place append and
bottom-right causal masking, against an upcast SDPA reference built from each sequence's valid prefix."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_flashattn


def reference(q, k_cache, v_cache, lengths, causal, scale):
    """Per sequence: float64 SDPA math over the first lengths[b] keys, bottom-right causal mask;
    queries that see no key are 0."""
    out = torch.zeros(q.shape, dtype=torch.float64)
    nq = q.shape[2]
    for b, n in enumerate(lengths):
        if n == 0:
            continue
        mask = None
        if causal:   # query i sees key j <= n - nq + i
            mask = torch.arange(n)[None, :] <= (n - nq + torch.arange(nq))[:, None]
        qb, kb, vb = (t[b:b + 1].double() for t in (q, k_cache[:, :, :n], v_cache[:, :, :n]))
        with sdpa_kernel(SDPBackend.MATH):
            o = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask, scale=scale, enable_gqa=True)
        if mask is not None:
            o[:, :, ~mask.any(-1)] = 0
        out[b] = o[0]
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("nq", [1, 2, 4, 16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("append", [0, 3])
def test_kvcache_matches_reference(dtype, nq, causal, append):
    torch.manual_seed(nq * 10 + append)
    B, Hq, Hkv, Nmax, d = 4, 4, 2, 200, 64
    q = torch.randn(B, Hq, nq, d, dtype=dtype)
    k_cache = torch.randn(B, Hkv, Nmax, d, dtype=dtype)
    v_cache = torch.randn(B, Hkv, Nmax, d, dtype=dtype)
    seqlens = torch.tensor([0, 1, 77, Nmax - append], dtype=torch.int32)   # ragged, empty and full
    k_new = torch.randn(B, Hkv, append, d, dtype=dtype) if append else None
    v_new = torch.randn(B, Hkv, append, d, dtype=dtype) if append else None
    k_before, v_before = k_cache.clone(), v_cache.clone()

    out = torch_flashattn.attention_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, k_new=k_new,
                                            v_new=v_new, causal=causal, scale=0.2)

    # The append landed at each sequence's position, and nothing else in the caches moved.
    k_expect, v_expect = k_before.clone(), v_before.clone()
    for b, n in enumerate(seqlens.tolist()):
        if append:
            k_expect[b, :, n:n + append] = k_new[b]
            v_expect[b, :, n:n + append] = v_new[b]
    assert torch.equal(k_cache, k_expect) and torch.equal(v_cache, v_expect)

    lengths = [n + append for n in seqlens.tolist()]
    ref = reference(q, k_cache, v_cache, lengths, causal, 0.2)
    err = (out.double() - ref).abs().max().item()
    assert err < (2e-6 if dtype == torch.float32 else 1e-2), f"max error {err:.2e}"


def test_kvcache_default_lengths_is_plain_attention():
    """Without cache_seqlens or new keys the whole cache is valid: with Nq = Nmax and causal, that
    is ordinary causal attention (both alignments agree when Nq = Nk)."""
    torch.manual_seed(3)
    q, k, v = (torch.randn(2, 2, 65, 32) for _ in range(3))
    torch.testing.assert_close(torch_flashattn.attention_kvcache(q, k, v, causal=True),
                               torch_flashattn.attention(q, k, v, causal=True))


def test_kvcache_bad_input_writes_nothing():
    q = torch.randn(2, 2, 1, 16)
    k_cache, v_cache = torch.randn(2, 2, 10, 16), torch.randn(2, 2, 10, 16)
    k_new, v_new = torch.randn(2, 2, 3, 16), torch.randn(2, 2, 3, 16)
    before = k_cache.clone()
    with pytest.raises(RuntimeError, match=r"cache_seqlens\[b\] \+ Nnew must be in 0..Nmax"):
        torch_flashattn.attention_kvcache(q, k_cache, v_cache, cache_seqlens=torch.tensor([2, 8], dtype=torch.int32),
                                          k_new=k_new, v_new=v_new)
    with pytest.raises(RuntimeError, match=r"cache_seqlens\[b\] \+ Nnew must be in 0..Nmax"):
        torch_flashattn.attention_kvcache(q, k_cache, v_cache, cache_seqlens=torch.tensor([-1, 0], dtype=torch.int32))
    with pytest.raises(RuntimeError, match="cache_seqlens must be an int32 tensor of shape"):
        torch_flashattn.attention_kvcache(q, k_cache, v_cache, cache_seqlens=torch.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="k_new and v_new must be given together"):
        torch_flashattn.attention_kvcache(q, k_cache, v_cache, k_new=k_new)
    with pytest.raises(RuntimeError, match=r"k_new and v_new must both be \(B, Hkv, Nnew, d\)"):
        torch_flashattn.attention_kvcache(q, k_cache, v_cache, k_new=k_new, v_new=v_new[:, :, :2])
    with pytest.raises(RuntimeError, match="contiguous last dimension"):
        torch_flashattn.attention_kvcache(q, torch.randn(2, 2, 10, 32)[..., ::2], v_cache)
    assert torch.equal(k_cache, before)


def test_kvcache_opcheck():
    q = torch.randn(2, 4, 3, 16)
    k_cache, v_cache = torch.randn(2, 2, 20, 16), torch.randn(2, 2, 20, 16)
    args = (q, k_cache, v_cache, torch.tensor([5, 9], dtype=torch.int32), torch.randn(2, 2, 3, 16),
            torch.randn(2, 2, 3, 16))
    torch.library.opcheck(torch.ops.fa.forward_kvcache.default, args, {"scale": 1 / math.sqrt(16), "causal": True})
