"""fa.forward_kvcache on the CPU and on CUDA (split-KV): attention over a KV cache with ragged lengths,
in-place append and bottom-right causal masking, against an upcast SDPA reference built from each
sequence's valid prefix. CUDA cases carry the `gpu` marker and skip without a device."""
import math
import random

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_flashattn
from conftest import DEVICES, SLACK, poison_scores


# Every SDPA backend, listed (torch 2.11's SDPBackend enum is not iterable).
ALL_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                SDPBackend.MATH]


# Integer views of the same width: cache contents compared bit for bit (NaN rows included).
INT_OF = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}


def reference(q, k_cache, v_cache, lengths, causal, scale, upcast=True):
    """Per sequence: SDPA over the first lengths[b] keys with the bottom-right causal mask; queries
    that see no key are 0. upcast: float64 math backend on the CPU (the exact answer); else
    PyTorch's own SDPA in the inputs' dtype and device (the error ours is held to), its math
    backend where the default one refuses."""
    dev = "cpu" if upcast else q.device
    out = torch.zeros(q.shape, dtype=torch.float64 if upcast else q.dtype, device=dev)
    nq = q.shape[2]
    for b, n in enumerate(lengths):
        if n == 0:
            continue
        mask = None
        if causal:   # query i sees key j <= n - nq + i
            mask = torch.arange(n, device=dev)[None, :] <= (n - nq + torch.arange(nq, device=dev))[:, None]
        qb, kb, vb = (t[b:b + 1].to(dev) for t in (q, k_cache[:, :, :n], v_cache[:, :, :n]))
        if upcast:
            qb, kb, vb = qb.double(), kb.double(), vb.double()
        o = None
        for backends in ([SDPBackend.MATH] if upcast else [ALL_BACKENDS, [SDPBackend.MATH]]):
            with sdpa_kernel(backends):
                try:
                    o = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask, scale=scale, enable_gqa=True)
                except RuntimeError:   # a backend that refuses the layout: the math one next
                    continue
            if mask is not None:
                o[:, :, ~mask.any(-1)] = 0
            if torch.isfinite(o).all():   # torch 2.11 CUDA gave non-finite results for scale <= 0
                break
        out[b] = o[0]
    return out


def assert_accurate(out, q, k_cache, v_cache, lengths, causal, scale, what=""):
    """FlashAttention's rule: our error against the float64 reference is at most 2 × PyTorch's own
    same-dtype error plus a tiny slack."""
    ref = reference(q, k_cache, v_cache, lengths, causal, scale)
    pt = reference(q, k_cache, v_cache, lengths, causal, scale, upcast=False)
    assert out.shape == q.shape and out.dtype == q.dtype and out.device == q.device
    assert torch.isfinite(out).all(), f"{what}: non-finite output"
    err = (out.double().cpu() - ref).abs().max().item()
    err_pt = (pt.double().cpu() - ref).abs().max().item()
    bound = 2 * err_pt + SLACK[q.dtype]
    assert err <= bound, f"{what}: our max error {err:.3e} > 2 × PyTorch's {err_pt:.3e} + slack = {bound:.3e}"


def run_case(device, dtype, B, Hq, Hkv, nq, d, Nmax, seqlens, append, causal, scale=None, seed=0, poison=None):
    """One call with fresh random inputs; checks the append and the result. poison: the value of
    every cache row past a sequence's length after the append (rows no key may come from)."""
    torch.manual_seed(seed)
    q = torch.randn(B, Hq, nq, d, dtype=dtype, device=device)
    k_cache = torch.randn(B, Hkv, Nmax, d, dtype=dtype, device=device)
    v_cache = torch.randn(B, Hkv, Nmax, d, dtype=dtype, device=device)
    if poison is not None:
        for b, n in enumerate(seqlens):
            k_cache[b, :, n + append:] = poison
            v_cache[b, :, n + append:] = poison
    sl = torch.tensor(seqlens, dtype=torch.int32, device=device)
    k_new = torch.randn(B, Hkv, append, d, dtype=dtype, device=device) if append else None
    v_new = torch.randn(B, Hkv, append, d, dtype=dtype, device=device) if append else None
    k_expect, v_expect = k_cache.clone(), v_cache.clone()
    for b, n in enumerate(seqlens):
        if append:
            k_expect[b, :, n:n + append] = k_new[b]
            v_expect[b, :, n:n + append] = v_new[b]
    out = torch_flashattn.attention_kvcache(q, k_cache, v_cache, cache_seqlens=sl, k_new=k_new, v_new=v_new,
                                            causal=causal, scale=scale)
    same = lambda x, y: torch.equal(x.view(INT_OF[x.dtype]), y.view(INT_OF[y.dtype]))   # NaN rows too
    assert same(k_cache, k_expect) and same(v_cache, v_expect), "append"
    what = f"{dtype} B={B} H={Hq}/{Hkv} Nq={nq} d={d} Nmax={Nmax} append={append} causal={causal}"
    assert_accurate(out, q, k_cache, v_cache, [n + append for n in seqlens], causal, scale, what)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("nq", [1, 2, 4, 16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("append", [0, 3])
def test_kvcache_matches_reference(device, dtype, nq, causal, append):
    torch.manual_seed(nq * 10 + append)
    B, Hq, Hkv, Nmax, d = 4, 4, 2, 200, 64
    q = torch.randn(B, Hq, nq, d, dtype=dtype, device=device)
    k_cache = torch.randn(B, Hkv, Nmax, d, dtype=dtype, device=device)
    v_cache = torch.randn(B, Hkv, Nmax, d, dtype=dtype, device=device)
    seqlens = torch.tensor([0, 1, 77, Nmax - append], dtype=torch.int32, device=device)   # ragged, empty, full
    k_new = torch.randn(B, Hkv, append, d, dtype=dtype, device=device) if append else None
    v_new = torch.randn(B, Hkv, append, d, dtype=dtype, device=device) if append else None
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
    err = (out.double().cpu() - ref).abs().max().item()
    assert err < (2e-6 if dtype == torch.float32 else 1e-2), f"max error {err:.2e}"


@pytest.mark.parametrize("device", DEVICES)
def test_kvcache_default_lengths_is_plain_attention(device):
    """Without cache_seqlens or new keys the whole cache is valid: with Nq = Nmax and causal, that
    is ordinary causal attention (both alignments agree when Nq = Nk)."""
    torch.manual_seed(3)
    q, k, v = (torch.randn(2, 2, 65, 32, device=device) for _ in range(3))
    torch.testing.assert_close(torch_flashattn.attention_kvcache(q, k, v, causal=True),
                               torch_flashattn.attention(q, k, v, causal=True))


@pytest.mark.parametrize("device", DEVICES)
def test_kvcache_bad_input_writes_nothing(device):
    def randn(*shape):
        return torch.randn(*shape, device=device)

    def seqlens(*values, dtype=torch.int32):
        return torch.tensor(values, dtype=dtype, device=device)

    q = randn(2, 2, 1, 16)
    k_cache, v_cache = randn(2, 2, 10, 16), randn(2, 2, 10, 16)
    k_new, v_new = randn(2, 2, 3, 16), randn(2, 2, 3, 16)
    before = k_cache.clone()
    if device == "cpu":
        with pytest.raises(RuntimeError, match=r"cache_seqlens\[1\] = 8 with Nnew = 3 appended keys: .* 0..Nmax = 0..10"):
            torch_flashattn.attention_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens(2, 8), k_new=k_new,
                                              v_new=v_new)
        with pytest.raises(RuntimeError, match=r"cache_seqlens\[0\] = -1 with Nnew = 0 appended keys"):
            torch_flashattn.attention_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens(-1, 0))
    else:   # read on the device only: untouched caches and a NaN output instead of an error
        for sl, kn, vn in ((seqlens(2, 8), k_new, v_new), (seqlens(-1, 0), None, None)):
            out = torch_flashattn.attention_kvcache(q, k_cache, v_cache, cache_seqlens=sl, k_new=kn, v_new=vn)
            assert out.isnan().all()
    with pytest.raises(RuntimeError, match=r"append Nnew = 11 keys, more than the caches hold \(Nmax = 10\)"):
        torch_flashattn.attention_kvcache(q, k_cache, v_cache, k_new=randn(2, 2, 11, 16), v_new=randn(2, 2, 11, 16))
    with pytest.raises(RuntimeError, match="cache_seqlens must be an int32 tensor of shape"):
        torch_flashattn.attention_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens(1, 2, dtype=torch.int64))
    with pytest.raises(RuntimeError, match="k_new and v_new must be given together"):
        torch_flashattn.attention_kvcache(q, k_cache, v_cache, k_new=k_new)
    with pytest.raises(RuntimeError, match=r"k_new and v_new must both be \(B, Hkv, Nnew, d\)"):
        torch_flashattn.attention_kvcache(q, k_cache, v_cache, k_new=k_new, v_new=v_new[:, :, :2])
    # Fewer than 4 dims: the shape check comes before anything reads a fourth stride.
    for kn, vn in ((k_new[:, :, 0], v_new), (k_new, v_new[:, :, 0]), (k_new[:, 0, 0], v_new)):
        with pytest.raises(RuntimeError, match=r"k_new and v_new must both be \(B, Hkv, Nnew, d\) .* got k_new "
                                               + r"\S+ \(" + ", ".join(map(str, kn.shape))):
            torch_flashattn.attention_kvcache(q, k_cache, v_cache, k_new=kn, v_new=vn)
    with pytest.raises(RuntimeError, match="contiguous last dimension"):
        torch_flashattn.attention_kvcache(q, randn(2, 2, 10, 32)[..., ::2], v_cache)
    with pytest.raises(RuntimeError, match=r"k_new and v_new must both be .* of q's dtype Float and device "
                                           r"\S+, got k_new Half \(2, 2, 3, 16\)"):
        torch_flashattn.attention_kvcache(q, k_cache, v_cache, k_new=k_new.half(), v_new=v_new)
    # Written in place: an expanded cache (its batches would overwrite each other), caches that share
    # memory with each other or with the rows written into them.
    shared = k_cache[:1].expand(2, -1, -1, -1)
    shared_before = shared.clone()
    with pytest.raises(RuntimeError, match=r"k_cache is written in place .* must not have elements that share "
                                           r"memory .*; pass k_cache.clone\(\)"):
        torch_flashattn.attention_kvcache(q, shared, v_cache, k_new=k_new, v_new=v_new)
    with pytest.raises(RuntimeError, match="v_cache is written in place"):
        torch_flashattn.attention_kvcache(q, k_cache, v_cache[:1].expand(2, -1, -1, -1), k_new=k_new, v_new=v_new)
    with pytest.raises(RuntimeError, match="k_cache is written in place and must not share memory with v_cache"):
        torch_flashattn.attention_kvcache(q, k_cache, k_cache, k_new=k_new, v_new=v_new)
    k3, v3 = randn(2, 2, 3, 16), randn(2, 2, 3, 16)     # caches of exactly Nnew rows
    with pytest.raises(RuntimeError, match="k_cache is written in place and must not share memory with k_new"):
        torch_flashattn.attention_kvcache(q, k3, v3, k_new=k3, v_new=v_new)
    with pytest.raises(RuntimeError, match="v_cache is written in place and must not share memory with k_new"):
        torch_flashattn.attention_kvcache(q, k3, v3, k_new=v3, v_new=v_new)
    assert torch.equal(k_cache, before) and torch.equal(shared, shared_before)
    # Read-only calls may take an expanded cache, and interleaved K/V caches are not overlapping.
    torch.testing.assert_close(torch_flashattn.attention_kvcache(q, shared, v_cache),
                               torch_flashattn.attention_kvcache(q, shared.clone(), v_cache))
    kv = randn(2, 2, 10, 2, 16)
    torch_flashattn.attention_kvcache(q, kv[:, :, :, 0], kv[:, :, :, 1], cache_seqlens=seqlens(2, 5), k_new=k_new,
                                      v_new=v_new)
    for b, at in ((0, 2), (1, 5)):
        assert torch.equal(kv[b, :, at:at + 3, 0], k_new[b]) and torch.equal(kv[b, :, at:at + 3, 1], v_new[b])


@pytest.mark.parametrize("device", DEVICES)
def test_kvcache_new_rows_from_the_cache_itself(device):
    """k_new / v_new taken as strided views of the caches they are appended to (an overlap
    get_overlap_status cannot judge) are read before anything is written: the append's semantics."""
    g = torch.Generator().manual_seed(3)
    kc, vc = (torch.randn(1, 2, 8, 4, generator=g).to(device) for _ in range(2))
    q = torch.randn(1, 2, 1, 4, generator=g).to(device)
    kn, vn = kc[:, :, 0:3], vc[:, :, 2:5]
    want_k, want_v = kc.clone(), vc.clone()
    want_k[:, :, 1:4], want_v[:, :, 1:4] = kc[:, :, 0:3].clone(), vc[:, :, 2:5].clone()
    ref = torch_flashattn.attention_kvcache(q, want_k.clone(), want_v.clone(), cache_seqlens=torch.tensor(
        [4], dtype=torch.int32, device=device))
    out = torch_flashattn.attention_kvcache(q, kc, vc, cache_seqlens=torch.tensor([1], dtype=torch.int32,
                                                                                  device=device), k_new=kn, v_new=vn)
    assert torch.equal(kc, want_k) and torch.equal(vc, want_v)
    torch.testing.assert_close(out, ref)


@pytest.mark.parametrize("device", DEVICES)
def test_kvcache_q_in_a_cache_appended_to(device):
    """q is read after the append: a q inside a cache written in place is refused, nothing written;
    a q that is a strided view of the cache (an overlap get_overlap_status cannot judge) is read as
    it was before the append."""
    g = torch.Generator().manual_seed(5)
    kc, vc = (torch.randn(1, 1, 8, 4, generator=g).to(device) for _ in range(2))
    kn, vn = (torch.randn(1, 1, 2, 4, generator=g).to(device) for _ in range(2))
    lens = torch.tensor([3], dtype=torch.int32, device=device)
    before = kc.clone()
    with pytest.raises(RuntimeError, match="k_cache is written in place .* must not share memory with q"):
        torch_flashattn.attention_kvcache(kc[:, :, 3:4], kc, vc, cache_seqlens=lens, k_new=kn, v_new=vn)
    assert torch.equal(kc, before)
    big = torch.randn(1, 1, 8, 8, generator=g).to(device)
    kc2, q = big[..., :4], big[:, :, 3:4, :4]            # q: row 3 of kc2, where k_new goes
    q0 = q.clone()
    ref = torch_flashattn.attention_kvcache(q0, kc2.clone(), vc.clone(), cache_seqlens=lens, k_new=kn, v_new=vn)
    out = torch_flashattn.attention_kvcache(q, kc2, vc, cache_seqlens=lens, k_new=kn, v_new=vn)
    torch.testing.assert_close(out, ref)


@pytest.mark.parametrize("device", DEVICES)
def test_kvcache_caches_sharing_elements_through_strided_views(device):
    """Caches written in place that share elements through views PyTorch's overlap test cannot judge
    (strided slices of one buffer) are refused before anything is written; caches laid out apart in
    one buffer (K and V halves of each row, or K and V rows interleaved) are taken, and the append
    lands in each."""
    g = torch.Generator().manual_seed(7)
    buf = torch.randn(1, 2, 12, 16, generator=g).to(device)
    q = torch.randn(1, 2, 1, 8, generator=g).to(device)
    kn, vn = (torch.randn(1, 2, 1, 8, generator=g).to(device) for _ in range(2))
    lens = torch.tensor([4], dtype=torch.int32, device=device)
    before = buf.clone()
    for kc, vc in ((buf[..., :8], buf[..., :8]),                    # the same view twice
                   (buf[:, :, 0:10, :8], buf[:, :, 2:12, :8]),      # rows two apart
                   (buf[..., :8], buf[..., 4:12]),                  # columns half over each other
                   (buf[:, :, 0:6, :8], buf[:, :, 5:11, 7:15])):    # one element (row 5, column 7)
        with pytest.raises(RuntimeError, match="k_cache is written in place and must not share memory with v_cache"):
            torch_flashattn.attention_kvcache(q, kc, vc, cache_seqlens=lens, k_new=kn, v_new=vn)
        assert torch.equal(buf, before)
    # Apart: each row's two halves, and K / V rows interleaved ((B, N, 2, H, d) read as (B, H, N, d)).
    kv = torch.randn(1, 12, 2, 2, 8, generator=g).to(device)
    for kc, vc in ((buf[..., :8], buf[..., 8:]), (kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2))):
        ref = torch_flashattn.attention_kvcache(q, kc.clone(), vc.clone(), cache_seqlens=lens, k_new=kn, v_new=vn)
        out = torch_flashattn.attention_kvcache(q, kc, vc, cache_seqlens=lens, k_new=kn, v_new=vn)
        torch.testing.assert_close(out, ref)
        assert torch.equal(kc[:, :, 4:5], kn) and torch.equal(vc[:, :, 4:5], vn)


def test_kvcache_caches_of_one_storage_refused_exactly_when_they_share_an_element():
    """Caches as random strided views of one storage (each dim of (B, H, N) in any order of stride, each
    stride past the span of the dims inside it, random gaps and offsets): a call that appends is refused
    exactly when the two views share an element (the element sets compared), and nothing is written then."""
    rng = random.Random(2)
    store, idx = torch.randn(6000), torch.arange(6000)
    B, H, N, d = 2, 2, 5, 4
    q, kn, vn = (torch.randn(B, H, 1, d) for _ in range(3))
    lens = torch.tensor([1, 3], dtype=torch.int32)

    def strided():
        strides, span = [0, 0, 0], d + rng.randint(0, 3)
        for dim in rng.sample(range(3), 3):
            strides[dim] = span + rng.randint(0, 2)
            span = strides[dim] * (B, H, N)[dim]
        return (*strides, 1), rng.randint(0, 200)

    refused_cases = 0
    for _ in range(300):
        (sa, oa), (sb, ob) = strided(), strided()
        kc, vc = store.as_strided((B, H, N, d), sa, oa), store.as_strided((B, H, N, d), sb, ob)
        share = bool(set(idx.as_strided((B, H, N, d), sa, oa).flatten().tolist())
                     & set(idx.as_strided((B, H, N, d), sb, ob).flatten().tolist()))
        before = store.clone()
        if share:
            refused_cases += 1
            with pytest.raises(RuntimeError, match="k_cache is written in place and must not share memory with v_cache"):
                torch_flashattn.attention_kvcache(q, kc, vc, cache_seqlens=lens, k_new=kn, v_new=vn)
            assert torch.equal(store, before)
        else:
            torch_flashattn.attention_kvcache(q, kc, vc, cache_seqlens=lens, k_new=kn, v_new=vn)
            store.copy_(before)
    assert 30 < refused_cases < 270                     # both outcomes drawn


@pytest.mark.parametrize("device", DEVICES)
def test_kvcache_empty_batch_with_new_rows(device):
    """B = 0 (or no heads) with k_new / v_new: an empty result, as without them."""
    for shape_q, shape_c, shape_n in (((0, 2, 1, 8), (0, 2, 10, 8), (0, 2, 3, 8)),
                                      ((1, 0, 1, 8), (1, 0, 10, 8), (1, 0, 3, 8))):
        out = torch_flashattn.attention_kvcache(torch.randn(shape_q, device=device), torch.randn(shape_c, device=device),
                                                torch.randn(shape_c, device=device),
                                                k_new=torch.randn(shape_n, device=device),
                                                v_new=torch.randn(shape_n, device=device))
        assert out.shape == shape_q


@pytest.mark.parametrize("device", DEVICES)
def test_kvcache_inputs_that_require_grad_raise(device):
    """The KV-cache op is forward only: an input that requires grad raises (its gradient would be None),
    with nothing written; under no_grad the call runs."""
    q = torch.randn(1, 2, 1, 8, device=device)
    kc, vc = torch.zeros(1, 2, 6, 8, device=device), torch.zeros(1, 2, 6, 8, device=device)
    kn, vn = torch.randn(1, 2, 2, 8, device=device), torch.randn(1, 2, 2, 8, device=device)
    sinks = torch.randn(2, device=device)
    for name in ("q", "k_new", "sinks"):
        args = dict(q=q, k_new=kn, sinks=sinks)
        args[name] = args[name].clone().requires_grad_()
        with pytest.raises(RuntimeError, match=f"fa.forward_kvcache: the KV-cache op has no gradient; {name} "
                                               "requires grad"):
            torch_flashattn.attention_kvcache(args["q"], kc, vc, k_new=args["k_new"], v_new=vn, sinks=args["sinks"])
        assert (kc == 0).all()
        with torch.no_grad():
            torch_flashattn.attention_kvcache(args["q"], kc.clone(), vc.clone(), k_new=args["k_new"], v_new=vn,
                                              sinks=args["sinks"])


@pytest.mark.parametrize("device", DEVICES)
def test_kvcache_append_bumps_the_cache_version(device):
    """The append writes the caches in place: their version counters move, so a graph that saved a cache
    before the write refuses to backward (as after PyTorch's in-place ops) instead of reading new rows."""
    w = torch.ones(8, device=device, requires_grad=True)
    kc, vc = torch.randn(1, 2, 6, 8, device=device), torch.randn(1, 2, 6, 8, device=device)
    y = (kc * w).sum()                                   # saves kc for w's gradient
    before = kc._version
    torch_flashattn.attention_kvcache(torch.randn(1, 2, 1, 8, device=device), kc, vc,
                                      k_new=torch.randn(1, 2, 2, 8, device=device),
                                      v_new=torch.randn(1, 2, 2, 8, device=device))
    assert kc._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
    # A read-only call (the drop-in's decoding step passes k and v as the caches) writes nothing: no new
    # version, and a graph that saved them still runs its backward.
    y = (kc * w).sum()
    before = kc._version
    torch_flashattn.attention_kvcache(torch.randn(1, 2, 1, 8, device=device), kc, vc)
    assert kc._version == before
    y.backward()


@pytest.mark.parametrize("device", DEVICES)
def test_kvcache_opcheck(device):
    q = torch.randn(2, 4, 3, 16, device=device)
    k_cache, v_cache = torch.randn(2, 2, 20, 16, device=device), torch.randn(2, 2, 20, 16, device=device)
    args = (q, k_cache, v_cache, torch.tensor([5, 9], dtype=torch.int32, device=device),
            torch.randn(2, 2, 3, 16, device=device), torch.randn(2, 2, 3, 16, device=device))
    torch.library.opcheck(torch.ops.fa.forward_kvcache.default, args, {"scale": 1 / math.sqrt(16), "causal": True})


# ---- CUDA: the split-KV kernels ----------------------------------------------------------------

gpu = pytest.mark.gpu


def spread(B, Nmax, append):
    """Ragged lengths before the append, from 0 to full."""
    return [round(b * (Nmax - append) / max(B - 1, 1)) for b in range(B)]


@gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("d", [64, 80, 128, 256])
@pytest.mark.parametrize("groups", [1, 4, 8])
@pytest.mark.parametrize("nq", [1, 2, 4, 16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("append", [0, 2])
def test_kvcache_cuda(dtype, d, groups, nq, causal, append):
    B, Hkv, Nmax = 5, 2, 300
    run_case("cuda", dtype, B, Hkv * groups, Hkv, nq, d, Nmax, spread(B, Nmax, append), append, causal,
             seed=d + nq + groups)


@gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("nq,groups", [(1, 8), (4, 4), (1, 1)])
def test_kvcache_cuda_long(dtype, nq, groups):
    """A 32k cache: many splits and the combine kernel."""
    run_case("cuda", dtype, 2, 2 * groups, 2, nq, 128, 32768, [32767, 20001], 1, True)


@gpu
@pytest.mark.parametrize("splits", [1, 3, 100000])
def test_kvcache_cuda_forced_splits(splits, fa_overrides):
    """decode_splits (the split sweep's knob): one split (no combine), an odd count, and more
    than the 64-key chunks allow (capped), on ragged lengths with GQA and an append."""
    fa_overrides(decode_splits=splits)
    run_case("cuda", torch.bfloat16, 3, 8, 2, 2, 128, 5000, [4998, 1, 2500], 2, True)


@gpu
@pytest.mark.parametrize("splits", [2, 5, 8])
@pytest.mark.parametrize("cluster", ["on", "off"], ids=["cluster", "combine"])
@pytest.mark.parametrize("d", [40, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_kvcache_cuda_cluster_merge(splits, cluster, d, causal, fa_overrides):
    """On sm_90, 2 to 8 splits can merge inside a thread block cluster (decode_cluster="on" forces
    it where the device holds such a cluster, "off" merges through the combine kernel instead, as
    below sm_90 always): 2, 5 and 8 splits, two row tiles (5 query tokens x 4 heads per KV head = 20
    packed rows), a sequence whose cache is empty before its appended token (every split but the
    first sees no key), GQA, both masks."""
    fa_overrides(decode_splits=splits, decode_cluster=cluster)
    run_case("cuda", torch.bfloat16, 3, 8, 2, 5, d, 3000, [2999 - 1, 0, 1200], 1, causal, seed=d + splits)


@gpu
@pytest.mark.parametrize("warps", [4, 8])
@pytest.mark.parametrize("splits", [1, 2, 5, 40])
@pytest.mark.parametrize("d", [72, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_kvcache_cuda_attend_warps(warps, splits, d, causal, fa_overrides):
    """Both d <= 128 tensor-core attend tiles, 4 and 8 warps per CTA (decode_warps; 8 falls
    back to 4 below sm_90): one split, splits merged in a cluster or by the combine kernel, two
    row tiles, an empty cache before the appended token, GQA, both masks."""
    fa_overrides(decode_warps=warps, decode_splits=splits)
    run_case("cuda", torch.bfloat16, 3, 8, 2, 5, d, 3000, [2999 - 1, 0, 1200], 1, causal, seed=d + splits)


@gpu
@pytest.mark.parametrize("warps", [4, 8])
@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("splits", [1, 5])
def test_kvcache_cuda_stages(warps, stages, splits, fa_overrides):
    """The d <= 128 attend tiles with 2 and 3 stages per warp (decode_stages), each warp taking
    runs of 4 adjacent key blocks: lengths that end inside a run, on a run's edge and before the
    first warp's run ends, NaN in the cache rows past them, causal with an append and GQA, one
    split and five."""
    fa_overrides(decode_warps=warps, decode_stages=stages, decode_splits=splits)
    run_case("cuda", torch.bfloat16, 4, 8, 2, 3, 128, 3000, [2996, 40, 1210, 1536], 2, True, poison=math.nan)
    run_case("cuda", torch.float16, 3, 4, 4, 1, 96, 2048, [2048, 63, 1000], 0, False, poison=math.nan)


@gpu
@pytest.mark.parametrize("causal", [False, True])
def test_kvcache_cuda_eight_warps_cluster_of_eight(causal, fa_overrides):
    """The 8-warp tile with 8 splits merged in clusters of 8 (decode_cluster="on" where the device
    holds them): the plan the split rule picks for one long sequence with few KV heads."""
    fa_overrides(decode_warps=8, decode_splits=8, decode_cluster="on")
    run_case("cuda", torch.bfloat16, 1, 8, 2, 5, 128, 9000, [8998], 2, causal, seed=8)


@gpu
@pytest.mark.parametrize("shape", [(1, 32, 8, 131072), (1, 32, 8, 65536), (1, 32, 32, 32768)],
                         ids=["H32-8_128k", "H32-8_64k", "H32-32_32k"])
def test_kvcache_cuda_one_long_sequence(shape):
    """B = 1 with a long cache, the split rule's own choice (on an H200: 8 splits of 8 warps in
    clusters of 8 at 64k and 128k; 4 splits of 8 warps and the combine kernel at 32k with 32 KV
    heads), with an append."""
    B, Hq, Hkv, Nmax = shape
    run_case("cuda", torch.bfloat16, B, Hq, Hkv, 1, 128, Nmax, [Nmax - 1], 1, False, seed=Nmax)


@gpu
@pytest.mark.parametrize("shape", [(1, 32, 8, 131072), (1, 32, 32, 32768), (8, 32, 8, 4096), (32, 32, 8, 4096),
                                   (16, 32, 32, 4096), (56, 32, 8, 2048)],
                         ids=["H32-8_128k", "H32-32_32k", "B8_4k", "B32_4k", "B16_H32-32_4k", "B56_2k"])
def test_kvcache_cuda_d64_split_rule(shape):
    """d = 64, the split rule's own choice (two CTAs per SM; on an H200: 31 splits and the wide
    combine at 128k, 8 splits in clusters of 8 at 32k with 32 KV heads, 4 at B = 8, one at B = 32;
    beyond one wave of CTAs, 2 splits at B = 16 with 32 KV heads and at B = 56 2k), with an append."""
    B, Hq, Hkv, Nmax = shape
    run_case("cuda", torch.bfloat16, B, Hq, Hkv, 1, 64, Nmax, [Nmax - 1] * B, 1, False, seed=Nmax + B)


@gpu
@pytest.mark.parametrize("splits,cluster", [(1, "off"), (4, "off"), (40, "off"), (4, "on")],
                         ids=["one", "combine", "combine40", "cluster"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_kvcache_cuda_bad_lengths_every_merge(splits, cluster, dtype, fa_overrides):
    """A bad cache_seqlens entry gives a NaN output whichever way the splits merge: one split, the
    combine kernel (which takes it from the partials' NaN lse, not from cache_seqlens), or a
    cluster; the caches stay untouched. Good lengths right after give the exact result."""
    fa_overrides(decode_splits=splits, decode_cluster=cluster)
    torch.manual_seed(5)
    q = torch.randn(2, 8, 1, 128, device="cuda", dtype=dtype)
    k, v = (torch.randn(2, 2, 3000, 128, device="cuda", dtype=dtype) for _ in range(2))
    k_new, v_new = (torch.randn(2, 2, 1, 128, device="cuda", dtype=dtype) for _ in range(2))
    before = k.clone(), v.clone()
    for seqlens in ([2999, 3000], [-1, 5]):
        sl = torch.tensor(seqlens, dtype=torch.int32, device="cuda")
        out = torch.ops.fa.forward_kvcache(q, k, v, sl, k_new, v_new, None, False)
        assert out.isnan().all()
        assert torch.equal(k, before[0]) and torch.equal(v, before[1])
    run_case("cuda", dtype, 2, 8, 2, 1, 128, 3000, [2000, 2999], 1, False, seed=splits)


@gpu
@pytest.mark.parametrize("combine", ["elem", "wide"])
@pytest.mark.parametrize("splits", [3, 50])
@pytest.mark.parametrize("d", [16, 40, 72, 256])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_kvcache_cuda_combine_kernels(combine, splits, d, dtype, fa_overrides):
    """Both combine kernels, forced with decode_combine: one thread per output element (32, 64
    or 128 threads per row, two elements per thread past d = 128; 4, 2 or 1 rows per CTA, 6 rows
    leaving a partial CTA) and four warps per row (the sums meeting in shared memory). 3 splits
    (one partial group of 8) and 47 splits of 128 keys (a pass of 32 weights and one of 15; groups
    of 8 loads, the last of 7), at head dims that do not fill the lanes."""
    fa_overrides(decode_combine=combine, decode_splits=splits, decode_cluster="off")
    run_case("cuda", dtype, 2, 4, 1, 2, d, 6000, [5999, 3001], 1, True)
    run_case("cuda", dtype, 2, 3, 1, 1, d, 6000, [4000, 5999], 0, False)


# Forced plans of the split-KV kernels: each way the splits merge.
MERGES = {"one": dict(decode_splits=1),
          "cluster": dict(decode_splits=4, decode_cluster="on"),
          "elem": dict(decode_splits=4, decode_cluster="off", decode_combine="elem"),
          "wide": dict(decode_splits=40, decode_cluster="off", decode_combine="wide"),
          "simt_elem": dict(family="simt", decode_splits=4, decode_combine="elem")}


@gpu
@pytest.mark.parametrize("dtype,merge", [
    (torch.float32, "one"), (torch.float32, "elem"), (torch.float32, "wide"),
    (torch.float16, "cluster"), (torch.float16, "elem"), (torch.bfloat16, "cluster"), (torch.bfloat16, "elem"),
    (torch.bfloat16, "wide"), (torch.bfloat16, "simt_elem")], ids=lambda x: str(x).replace("torch.", ""))
def test_kvcache_cuda_nonfinite_rows_every_merge(dtype, merge, fa_overrides):
    """NaN and ±inf in q or k give NaN in exactly SDPA's NaN rows (the whole row) however the splits
    merge: the CUDA-core kernel (fp32; fp16 and bf16 under the simt family) with one split and the
    element and wide combine kernels, the tensor-core kernel with a cluster (where the device holds
    one; the combine kernel elsewhere) and both combine kernels. A row whose split met a NaN score
    came out 0 (its l read as "no key"), or with splits finite and wrong (that split dropped). The
    rows of conftest.poison_scores: NaN or inf in q, a NaN key, a +inf and a −inf score, a clean
    row; 4096 keys, so that every split sees keys. The finite rows are exact by the rule. (One split
    on the tensor-core kernel gave NaN rows already; its lse is checked through attention_lse in
    test_values.py.)"""
    fa_overrides(**MERGES[merge])
    torch.manual_seed(9)
    B, Hq, Hkv, nq, d, N = 2, 4, 2, 2, 64, 4096
    q = torch.randn(B, Hq, nq, d, dtype=dtype, device="cuda")
    k_cache, v_cache = (torch.randn(B, Hkv, N, d, dtype=dtype, device="cuda") for _ in range(2))
    nan_rows = poison_scores(q, k_cache)
    out = torch_flashattn.attention_kvcache(q, k_cache, v_cache)
    ref = reference(q, k_cache, v_cache, [N] * B, False, None)
    assert torch.equal(ref.isnan().any(-1), nan_rows[..., None].expand(B, Hq, nq)), "the poisoned rows"
    got = out.isnan().cpu()
    assert torch.equal(got.any(-1), ref.isnan().any(-1)), "NaN rows differ from SDPA's"
    assert torch.equal(got, ref.isnan()), "a NaN row is NaN in only some of its elements"
    pt = reference(q, k_cache, v_cache, [N] * B, False, None, upcast=False)
    fin = ~nan_rows
    err = (out.double().cpu() - ref)[fin].abs().max().item()
    err_pt = (pt.double().cpu() - ref)[fin].abs().max().item()
    assert err <= 2 * err_pt + SLACK[dtype], f"finite rows: our max error {err:.3e}, PyTorch's {err_pt:.3e}"


@gpu
@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("scale", [1e38, -1e38])
@pytest.mark.parametrize("k_mag", [1e-30, 1e-39], ids=["scores_1e9", "scores_4"])
@pytest.mark.parametrize("dtype,family", [(torch.float32, "auto"), (torch.bfloat16, "simt")], ids=["fp32", "bf16_simt"])
def test_kvcache_cuda_huge_scale_small_scores(dtype, family, k_mag, scale, splits, fa_overrides):
    """Any scale up to ±2.3e38 is allowed and only scores past it overflow (test_bad_input.py's
    test_huge_scale_small_scores_on_the_cpu): the CUDA-core attend kernel multiplied q by
    scale · log2 e before the dot product, which left a float at q = 10, scale 1e38 (NaN scores: rows
    of 0 or NaN). k of 1e-30 gives scores of about 1e9 (one key takes each row, with P exactly 1),
    1e-39 (subnormal, as any k must be for scores near 1 here) scores of about 4 (a spread
    softmax). Against float64, one split and three combined."""
    fa_overrides(family=family, decode_splits=splits, decode_cluster="off")
    torch.manual_seed(3)
    B, Hq, Hkv, nq, d, N = 1, 4, 2, 2, 16, 300
    q = torch.full((B, Hq, nq, d), 10.0, dtype=dtype, device="cuda")
    q[:, :, 1] = -10.0
    k_cache = (torch.randn(B, Hkv, N, d, dtype=torch.float64) * k_mag).to(device="cuda", dtype=dtype)
    v_cache = torch.randn(B, Hkv, N, d, dtype=dtype, device="cuda")
    out = torch_flashattn.attention_kvcache(q, k_cache, v_cache, scale=scale)
    ref = reference(q, k_cache, v_cache, [N] * B, False, scale)
    assert torch.isfinite(out).all(), "non-finite output"
    tol = 1e-5 if dtype == torch.float32 else 2 ** -7
    torch.testing.assert_close(out.double().cpu(), ref, rtol=tol, atol=1e-5)


@gpu
@pytest.mark.parametrize("evict", ["off", "on"])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_kvcache_cuda_evict_first(evict, d, dtype, fa_overrides):
    """The attend kernel's copies of whole 16-key blocks with and without the L2 evict-first
    policy, forced with decode_evict (by default on for one row tile and caches up to 4x the
    L2, so nearly every other test runs with it): d at the tiles' widths, ragged lengths ending
    mid-block, append, causal; one row tile (R = 8) and four sharing their keys (R = 64)."""
    fa_overrides(decode_evict=evict)
    run_case("cuda", dtype, 3, 8, 2, 2, d, 3000, [2997, 17, 1500], 3, True)
    run_case("cuda", dtype, 1, 16, 4, 16, d, 5000, [4990], 0, False)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("poison", [math.nan, math.inf])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_kvcache_rows_past_lengths_unread(device, poison, d, fa_overrides):
    """Cache rows past each sequence's length hold NaN or inf and must not reach the output. On
    CUDA the attend kernel issues its first K/V copies before it reads cache_seqlens, from rows
    up to the end of its chunk; where those blocks
    hold rows past the length it loads them again with zeros there. 4 splits of 768 keys: lengths
    ending in a split's first block (770 = 768 + 2, 17), one block further (800), on a split's
    edge (1536), mid-split and full; append and causal; one row tile and four (R = 64)."""
    for cluster in (["off", "on"] if device == "cuda" else ["off"]):
        fa_overrides(decode_splits=4, decode_cluster=cluster)
        run_case(device, torch.bfloat16, 6, 8, 2, 2, d, 3072, [767, 14, 797, 1533, 2000, 3069], 3, True,
                 poison=poison)
        run_case(device, torch.bfloat16, 4, 8, 2, 1, d, 3072, [770, 17, 1536, 3072], 0, False, poison=poison)
        run_case(device, torch.float16, 1, 16, 4, 16, d, 3072, [800], 0, False, poison=poison)


@gpu
@pytest.mark.parametrize("case", [
    dict(B=1, Hq=1, Hkv=1, nq=1, d=1, Nmax=7, seqlens=[7], append=0, causal=False),   # d = 1
    dict(B=2, Hq=6, Hkv=3, nq=3, d=33, Nmax=129, seqlens=[0, 126], append=3, causal=True),   # odd d
    dict(B=3, Hq=8, Hkv=1, nq=5, d=40, Nmax=64, seqlens=[0, 1, 2], append=0, causal=True),   # L < Nq
    dict(B=1, Hq=16, Hkv=2, nq=40, d=64, Nmax=700, seqlens=[650], append=40, causal=True),   # R = 320 rows
    dict(B=2, Hq=2, Hkv=2, nq=2, d=128, Nmax=1025, seqlens=[1000, 5], append=0, causal=False, scale=-0.3),
    dict(B=2, Hq=2, Hkv=2, nq=1, d=64, Nmax=17, seqlens=[3, 17], append=0, causal=False, scale=0.0),
    dict(B=2, Hq=4, Hkv=2, nq=4, d=256, Nmax=0, seqlens=[0, 0], append=0, causal=False),   # empty cache
], ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items() if k != "seqlens"))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_kvcache_cuda_edges(case, dtype):
    run_case("cuda", dtype, **case)


@gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_kvcache_cuda_simt_fallback(dtype, fa_overrides):
    """The simt family runs fp16/bf16 on the CUDA-core kernel (the fallback for small-smem devices)."""
    fa_overrides(family="simt")
    run_case("cuda", dtype, 3, 8, 2, 2, 80, 500, [0, 250, 497], 3, True)


@gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_kvcache_cuda_views(dtype):
    """q as a (B, Nq, H, d) transpose, caches and new keys misaligned by a one-element slice: the
    scalar load paths."""
    torch.manual_seed(1)
    B, Hq, Hkv, nq, d, Nmax, append = 2, 4, 2, 3, 64, 90, 2
    q = torch.randn(B, nq, Hq, d, dtype=dtype, device="cuda").transpose(1, 2)
    k_cache = torch.randn(B, Hkv, Nmax, d + 1, dtype=dtype, device="cuda")[..., 1:]
    v_cache = torch.randn(B, Hkv, Nmax, d + 1, dtype=dtype, device="cuda")[..., 1:]
    k_new = torch.randn(B, Hkv, append, d + 1, dtype=dtype, device="cuda")[..., 1:]
    v_new = torch.randn(B, append, Hkv, d, dtype=dtype, device="cuda").transpose(1, 2)
    sl = torch.tensor([10, 88], dtype=torch.int32, device="cuda")
    out = torch_flashattn.attention_kvcache(q, k_cache, v_cache, cache_seqlens=sl, k_new=k_new, v_new=v_new,
                                            causal=True)
    assert torch.equal(k_cache[1, :, 88:], k_new[1]) and torch.equal(v_cache[0, :, 10:12], v_new[0])
    assert_accurate(out, q, k_cache, v_cache, [12, 90], True, None, "views")


@gpu
def test_kvcache_cuda_matches_cpu():
    """The same call on both backends: same caches after the append, outputs within fp32 rounding."""
    torch.manual_seed(2)
    B, Hq, Hkv, nq, d, Nmax, append = 3, 8, 2, 4, 48, 333, 4
    args = [torch.randn(B, Hq, nq, d), torch.randn(B, Hkv, Nmax, d), torch.randn(B, Hkv, Nmax, d),
            torch.tensor([0, 100, 329], dtype=torch.int32), torch.randn(B, Hkv, append, d),
            torch.randn(B, Hkv, append, d)]
    cuda_args = [t.cuda() for t in args]
    out_cpu = torch.ops.fa.forward_kvcache(*args, 0.3, True)
    out_cuda = torch.ops.fa.forward_kvcache(*cuda_args, 0.3, True)
    assert torch.equal(args[1], cuda_args[1].cpu()) and torch.equal(args[2], cuda_args[2].cpu())
    torch.testing.assert_close(out_cuda.cpu(), out_cpu, atol=2e-5, rtol=1e-5)


@gpu
def test_kvcache_cuda_graph():
    """Captured once, replayed with new lengths, queries and new keys: equals the eager call (the
    split count depends on shapes only, and nothing synchronises)."""
    torch.manual_seed(4)
    B, Hq, Hkv, nq, d, Nmax, append = 4, 32, 8, 1, 128, 8192, 1
    dt = torch.bfloat16

    def randn(*shape):
        return torch.randn(*shape, dtype=dt, device="cuda")

    q, k_new, v_new = randn(B, Hq, nq, d), randn(B, Hkv, append, d), randn(B, Hkv, append, d)
    k0, v0 = randn(B, Hkv, Nmax, d), randn(B, Hkv, Nmax, d)
    k_cache, v_cache = k0.clone(), v0.clone()
    sl = torch.tensor([5, 100, 4000, 8000], dtype=torch.int32, device="cuda")

    def call():
        return torch_flashattn.attention_kvcache(q, k_cache, v_cache, cache_seqlens=sl, k_new=k_new, v_new=v_new,
                                                 causal=True)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()   # warm-up: per-device attributes are read and cached outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call()

    for lengths in ([0, 8191, 17, 3000], [8191, 8191, 8191, 8191]):
        sl.copy_(torch.tensor(lengths, dtype=torch.int32))
        q.copy_(randn(B, Hq, nq, d))
        k_new.copy_(randn(B, Hkv, append, d))
        k_cache.copy_(k0)
        v_cache.copy_(v0)
        graph.replay()
        k_eager, v_eager = k0.clone(), v0.clone()
        expect = torch_flashattn.attention_kvcache(q, k_eager, v_eager, cache_seqlens=sl, k_new=k_new,
                                                   v_new=v_new, causal=True)
        torch.cuda.synchronize()
        assert torch.equal(out, expect) and torch.equal(k_cache, k_eager) and torch.equal(v_cache, v_eager)
        assert_accurate(out, q, k_cache, v_cache, [n + append for n in lengths], True, None, "graph")
