"""The variants in the tensor-core kernels (csrc/cuda/sm90.cu and sm80.cu, VAR): which calls they
take, and their accuracy where their own structure matters, on sequences long enough for many query
tiles and key blocks (test_variants.py's shapes fit in one or two):

- the key-block range of a tile (the window and causal about δ), blocks with and without masks,
  tiles whose rows see no key (bottom-right causal with Nq > Nk), tails of Nq and Nk;
- each variant and their combinations at d = 64, 128 and 256, fp16 and bf16, GQA, each family
  forced, by FlashAttention's rule against test_variants' float64 reference;
- packed sequences, each family forced: long ragged ones with every variant, and cu_seqlens that
  break the rules, which make the whole output NaN without a host read; unpacked causal windows on
  the packed walk (its counter), bit for bit against every grid;
- key_mask rows of every kind (none, whole runs, holes, many batch entries), whose ranges the
  kernels scan on the device;
- that these calls run in a kernel (the exact path's counter does not move), and that the calls
  none takes (fp32) take the exact path.

GPU only; the Hopper kernel needs compute capability 9.0, the sm_80 kernel 8.0 or later.
"""
import re

import pytest
import torch

import torch_flashattn
from test_variants import (alibi_heads, assert_variant_accurate, bernoulli, describe, make_qkv, rand, seed_of,
                           transposed_mask, variant_reference, variant_visible)

pytestmark = pytest.mark.gpu

FAMILIES = ["sm90", "sm80"]


def use_family(family, fa_overrides):
    """Forces a tensor-core family (skipping where this GPU lacks it)."""
    cc = torch.cuda.get_device_capability()
    if (family == "sm90" and cc != (9, 0)) or cc < (8, 0):
        pytest.skip(f"the {family} kernel does not run on compute capability {cc}")
    fa_overrides(family=family)


def padding_mask(B, Nk, device, left=False):
    """A padded batch's key_mask: sequence b holds Nk − 37·b valid keys (left- or right-padded)."""
    m = torch.zeros(B, Nk, dtype=torch.bool)
    for b in range(B):
        n = max(Nk - 37 * b - 5, 1)
        if left:
            m[b, Nk - n:] = True
        else:
            m[b, :n] = True
    return m.to(device)


def kernel_case(name, g, B, Hq, Nq, Nk, dtype, device):
    band = torch.ones(Nq, Nk, dtype=torch.bool).tril(Nk - Nq).triu(Nk - Nq - 90)   # a bottom-right band
    Nk8 = (Nk + 7) // 8 * 8
    cases = {
        "window_sym": lambda: dict(window=(100, 50)),
        "window_sym_bottom_right": lambda: dict(window=(100, 50), causal_align="bottom_right"),
        "causal_bottom_right": lambda: dict(causal=True, causal_align="bottom_right"),
        "sliding_causal": lambda: dict(causal=True, window=(256, -1)),
        "sliding_causal_bottom_right": lambda: dict(causal=True, causal_align="bottom_right", window=(200, -1)),
        "window_right_only": lambda: dict(window=(-1, 3)),
        "softcap_causal": lambda: dict(causal=True, softcap=30.0),
        "softcap_small": lambda: dict(softcap=2.0, scale=0.3),
        "alibi_causal": lambda: dict(causal=True, alibi_slopes=alibi_heads(Hq, device)),
        "sinks_window": lambda: dict(sinks=rand(g, Hq, device=device) * 2, window=(64, 64)),
        "key_mask_right_padded": lambda: dict(key_mask=padding_mask(B, Nk, device)),
        "key_mask_left_padded_causal": lambda: dict(key_mask=padding_mask(B, Nk, device, left=True), causal=True,
                                                     causal_align="bottom_right"),
        "t5_bias": lambda: dict(attn_mask=rand(g, 1, Hq, Nq, Nk, dtype=dtype, device=device)),
        # rows of even stride starting one element past an aligned address: read key by key
        "bias_odd_offset": lambda: dict(attn_mask=rand(g, 1, Hq, Nq, Nk + 2, dtype=dtype, device=device)[..., 1:-1]),
        # rows 16-byte aligned (the Hopper kernel stages the blocks in shared memory; keys past Nk unread)
        "t5_bias_aligned": lambda: dict(attn_mask=rand(g, 1, Hq, Nq, Nk8, dtype=dtype, device=device)[..., :Nk]),
        "bias_aligned_combo": lambda: dict(causal=True, causal_align="bottom_right", window=(300, -1), softcap=20.0,
                                           alibi_slopes=alibi_heads(Hq, device), sinks=rand(g, Hq, device=device),
                                           key_mask=bernoulli(g, 0.9, B, Nk, device=device),
                                           attn_mask=rand(g, B, 1, Nq, Nk8, dtype=dtype, device=device)[..., :Nk]),
        "bool_band": lambda: dict(attn_mask=band.to(device)),
        "float_transposed": lambda: dict(attn_mask=transposed_mask(g, Nq, Nk, device)),
        # a softcap with the visibility variants alone (the Hopper kernel's FA_VAR_CAP)
        "softcap_visibility": lambda: dict(causal=True, causal_align="bottom_right", window=(300, -1), softcap=20.0,
                                           sinks=rand(g, Hq, device=device),
                                           key_mask=bernoulli(g, 0.9, B, Nk, device=device)),
        "combo": lambda: dict(causal=True, causal_align="bottom_right", window=(300, -1), softcap=20.0,
                              alibi_slopes=(torch.rand(B, Hq, generator=g) * 0.05).to(device),
                              sinks=rand(g, Hq, device=device), key_mask=bernoulli(g, 0.9, B, Nk, device=device),
                              attn_mask=rand(g, B, 1, 1, Nk, device=device)),
    }
    return cases[name]()


KERNEL_CASES = ["window_sym", "window_sym_bottom_right", "causal_bottom_right", "sliding_causal",
                "sliding_causal_bottom_right", "window_right_only", "softcap_causal", "softcap_small",
                "alibi_causal",
                "sinks_window", "key_mask_right_padded", "key_mask_left_padded_causal", "t5_bias", "bias_odd_offset",
                "t5_bias_aligned", "bias_aligned_combo", "bool_band",
                "float_transposed", "softcap_visibility", "combo"]
# (B, Hq, Hkv, Nq, Nk): Nq < Nk, Nq > Nk (bottom-right rows that see nothing), tails of both.
LONG_SHAPES = [(2, 4, 2, 300, 1100), (2, 2, 1, 1100, 700), (1, 4, 4, 513, 513)]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", LONG_SHAPES, ids=lambda s: "B{}-H{}-{}-Nq{}-Nk{}".format(*s))
@pytest.mark.parametrize("case", KERNEL_CASES)
def test_long_variants_in_the_kernel(case, shape, dtype, d, family, fa_overrides):
    use_family(family, fa_overrides)
    B, Hq, Hkv, Nq, Nk = shape
    g = torch.Generator().manual_seed(seed_of("kernel", case, shape, d))
    q, k, v = make_qkv(g, B, Hq, Hkv, Nq, Nk, d, dtype, "cuda")
    variants = kernel_case(case, g, B, Hq, Nq, Nk, dtype, "cuda")
    what = f"{family} {case} {dtype} {shape} d={d}: {describe(variants)}"
    before = torch.ops.fa._exact_calls()
    out, lse = torch_flashattn.attention_lse(q, k, v, **variants)
    assert torch.ops.fa._exact_calls() == before, f"{what}: took the exact path, not the kernel"
    assert_variant_accurate(out, lse, q, k, v, what=what, **variants)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_softcap_nan_key_makes_its_rows_nan(causal, d, family, fa_overrides):
    """A NaN in one key of each head under a softcap (tanh(NaN) = NaN): exactly the rows that see it
    are NaN, in every column, as a NaN score gives in SDPA; the row max, which passes over NaN, must
    not drop it. The NaN keys lie in several key blocks, on columns of different threads."""
    use_family(family, fa_overrides)
    g = torch.Generator().manual_seed(seed_of("softcap_nan", d, causal))
    H, N = 8, 300
    q, k, v = make_qkv(g, 1, H, H, N, N, d, torch.bfloat16, "cuda")
    bad = [3, 11, 147, 155, 130, 141, 290, 299]          # head h's NaN key
    for h, j in enumerate(bad):
        k[0, h, j, 0] = float("nan")
    out = torch_flashattn.attention(q, k, v, causal=causal, softcap=20.0)[0]
    rows = torch.arange(N, device="cuda")[None, :]
    sees = rows >= torch.tensor(bad, device="cuda")[:, None]            # (H, N): row i sees key bad[h]
    if not causal:
        sees = torch.ones_like(sees)
    assert torch.equal(out.isnan().all(-1), sees), f"d={d} causal={causal}: NaN rows"
    assert torch.isfinite(out[~sees]).all(), f"d={d} causal={causal}: rows that do not see the NaN key"


@pytest.mark.parametrize("d", [64, 128, 256])
def test_float_masks_the_hopper_kernel_stages(d, fa_overrides):
    """A float attn_mask of q's dtype with 16-byte aligned rows reaches the Hopper kernel through shared
    memory at d <= 128 (a kernel of the sm90_tile_mask instantiation runs); an unaligned one, an fp32
    one and d = 256 are read entry by entry. Both ways agree with the reference."""
    use_family("sm90", fa_overrides)
    g = torch.Generator().manual_seed(seed_of("staged", d))
    B, Hq, Hkv, Nq, Nk = 2, 4, 2, 300, 1100
    q, k, v = make_qkv(g, B, Hq, Hkv, Nq, Nk, d, torch.bfloat16, "cuda")
    wide = rand(g, 1, Hq, Nq, (Nk + 7) // 8 * 8 + 8, dtype=torch.bfloat16, device="cuda")   # rows of 16·k bytes
    for mask, staged in ((wide[..., :Nk], d <= 128), (wide[..., 1:Nk + 1], False),
                         (wide[..., :Nk].float(), False)):
        out, names = kernels_run(lambda: torch_flashattn.attention_lse(q, k, v, attn_mask=mask))
        ran = [n for n in names if "fa_sm90_forward_kernel" in n]
        assert len(ran) == 1, f"d={d}: not one Hopper forward kernel (sizing the scratch runs none): {ran}"
        assert any("sm90_tile_mask" in n for n in ran) == staged, f"d={d} stride {mask.stride()} {mask.dtype}: {ran}"
        assert_variant_accurate(*out, q, k, v, what=f"staged={staged} d={d}", attn_mask=mask)


def test_which_calls_the_kernel_takes():
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("the variants' kernels need compute capability 8.0")
    g = torch.Generator().manual_seed(5)
    q, k, v = make_qkv(g, 2, 4, 2, 64, 96, 64, torch.bfloat16, "cuda")
    counts = []
    for call in (lambda: torch_flashattn.attention(q, k, v, window=(8, 8)),
                 lambda: torch_flashattn.attention(q, k, v, softcap=5.0, scale=0.0),
                 lambda: torch_flashattn.attention(q.float(), k.float(), v.float(), window=(8, 8)),
                 lambda: torch_flashattn.attention_varlen(
                     q[0].transpose(0, 1).contiguous(), k[0].transpose(0, 1).contiguous(),
                     v[0].transpose(0, 1).contiguous(), torch.tensor([0, 64], dtype=torch.int32, device="cuda"),
                     torch.tensor([0, 96], dtype=torch.int32, device="cuda"), 64, 96, window=(8, 8))):
        before = torch.ops.fa._exact_calls()
        call()
        counts.append(torch.ops.fa._exact_calls() - before)
    assert counts == [0, 0, 1, 0], "bf16 (softcap with scale 0, packed sequences too) in a kernel; fp32 exact"


@pytest.mark.parametrize("softcap", [None, 20.0], ids=["masks", "softcap"])
@pytest.mark.parametrize("align,nq,nk,consumers", [("bottom_right", 700, 1000, 2), ("bottom_right", 700, 2000, 3),
                                                   ("bottom_right", 1100, 2000, 3), ("top_left", 700, 2000, 2)])
def test_d64_causal_tile_by_the_keys_rows_see(align, nq, nk, consumers, softcap, fa_overrides):
    """d = 64 causal calls up to 1024 query rows run the 2-consumer tile, bottom-right ones only up
    to 1024 keys too (their rows see up to Nk keys: past it the 3-consumer tile, sm90_d64_short)."""
    use_family("sm90", fa_overrides)
    g = torch.Generator().manual_seed(seed_of("d64 tile", align, nq, nk, softcap))
    q, k, v = make_qkv(g, 2, 4, 2, nq, nk, 64, torch.bfloat16, "cuda")
    variants = dict(causal=True, causal_align=align, softcap=softcap)
    what = f"d=64 {align} Nq={nq} Nk={nk} softcap={softcap}"
    (out, lse), names = kernels_run(lambda: torch_flashattn.attention_lse(q, k, v, **variants))
    ran = [n for n in names if "fa_sm90_forward_kernel" in n]
    assert len(ran) == 1 and f"sm90_tile<64, 128, 2, {consumers}, " in ran[0], f"{what}: {ran}"
    assert_variant_accurate(out, lse, q, k, v, what=what, **variants)


@pytest.mark.parametrize("family", FAMILIES)
def test_poisoned_output_fully_written(family, fa_overrides):
    """Every output element and lse entry is written by the kernel (inputs that leave rows with
    no key, rows past the last query tile's end), including rows that see nothing."""
    use_family(family, fa_overrides)
    g = torch.Generator().manual_seed(6)
    B, Hq, Nq, Nk, d = 2, 4, 333, 200, 128
    q, k, v = make_qkv(g, B, Hq, 2, Nq, Nk, d, torch.bfloat16, "cuda")
    variants = dict(causal=True, causal_align="bottom_right", window=(50, -1))
    torch.cuda.empty_cache()
    for _ in range(3):   # leave NaN in the allocator's blocks the outputs may reuse
        torch.full((B, Hq, Nq, d), float("nan"), dtype=torch.bfloat16, device="cuda")
    out, lse = torch_flashattn.attention_lse(q, k, v, **variants)
    assert not out.isnan().any() and not lse.isnan().any()
    assert (out[:, :, : Nq - Nk] == 0).all() and (lse[:, :, : Nq - Nk] == float("-inf")).all()
    assert_variant_accurate(out, lse, q, k, v, what="poisoned", **variants)


# ---- key_mask's ranges -----------------------------------------------------------------------

def key_mask_rows(g, B, Nk, device):
    """key_mask rows of every kind the kernels tell apart (each batch entry's range of visible keys,
    whether it is whole, scanned on the device): all keys, none, a middle run, holes inside a
    middle run, one last key, left padding, one first key, then random rows."""
    m = torch.zeros(B, Nk, dtype=torch.bool)
    kinds = [lambda r: r.fill_(True), lambda r: None, lambda r: r[Nk // 5: Nk // 5 * 3].fill_(True),
             lambda r: r[Nk // 3: Nk - 7].copy_(torch.rand(Nk - 7 - Nk // 3, generator=g) < 0.6),
             lambda r: r[Nk - 1:].fill_(True), lambda r: r[Nk - Nk // 3:].fill_(True), lambda r: r[:1].fill_(True)]
    for b in range(B):
        if b < len(kinds):
            kinds[b](m[b])
        else:
            m[b] = torch.rand(Nk, generator=g) < 0.5
    return m.to(device)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("shape", [(9, 2, 1, 300, 1501), (300, 1, 1, 70, 259)],
                         ids=lambda s: "B{}-H{}-{}-Nq{}-Nk{}".format(*s))
@pytest.mark.parametrize("causal", [False, True])
def test_key_mask_ranges(causal, shape, d, family, fa_overrides):
    """key_mask rows of every kind: the blocks outside a row's visible keys are skipped, a whole run
    acts as a window, holes keep the per-key test, a row with none gives 0 (lse −inf). Rows start
    off 16-byte boundaries (Nk odd); B = 300 is past the room the d = 256 Hopper tile has for
    every row's range, where it tests every key instead."""
    use_family(family, fa_overrides)
    B, Hq, Hkv, Nq, Nk = shape
    g = torch.Generator().manual_seed(seed_of("key_mask", shape, d, causal))
    q, k, v = make_qkv(g, B, Hq, Hkv, Nq, Nk, d, torch.bfloat16, "cuda")
    variants = dict(key_mask=key_mask_rows(g, B, Nk, "cuda"), causal=causal, causal_align="bottom_right")
    before = torch.ops.fa._exact_calls()
    out, lse = torch_flashattn.attention_lse(q, k, v, **variants)
    assert torch.ops.fa._exact_calls() == before, "took the exact path, not the kernel"
    assert (out[1] == 0).all() and (lse[1] == float("-inf")).all(), "a row with no key: 0 and lse −inf"
    assert_variant_accurate(out, lse, q, k, v, what=f"{family} key_mask {shape} d={d} causal={causal}", **variants)


# ---- packed sequences ------------------------------------------------------------------------

# (lens_q, lens_k): sequences of many tiles and key blocks, one query, no query, no key, Nq_b > Nk_b.
LONG_VARLEN = [([300, 1, 0, 513, 129, 700, 64], [1100, 130, 5, 513, 0, 600, 64])]
VARLEN_CASES = {
    "plain": lambda B, Hq, g: dict(),
    "causal": lambda B, Hq, g: dict(causal=True),
    "causal_bottom_right": lambda B, Hq, g: dict(causal=True, causal_align="bottom_right"),
    "sliding_bottom_right": lambda B, Hq, g: dict(causal=True, causal_align="bottom_right", window=(200, -1)),
    "window_sym": lambda B, Hq, g: dict(window=(100, 50)),
    "softcap_alibi_batch_sinks": lambda B, Hq, g: dict(
        softcap=20.0, alibi_slopes=(torch.rand(B, Hq, generator=g) * 0.05).cuda(), sinks=rand(g, Hq, device="cuda")),
}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", list(VARLEN_CASES))
def test_long_varlen_in_the_kernel(case, dtype, d, family, fa_overrides):
    use_family(family, fa_overrides)
    from test_variants import assert_varlen_accurate, run_varlen
    lens_q, lens_k = LONG_VARLEN[0]
    Hq, Hkv = 4, 2
    g = torch.Generator().manual_seed(seed_of("varlen", case, d))
    q = rand(g, sum(lens_q), Hq, d, dtype=dtype, device="cuda")
    k, v = (rand(g, sum(lens_k), Hkv, d, dtype=dtype, device="cuda") for _ in range(2))
    variants = VARLEN_CASES[case](len(lens_q), Hq, g)
    before = torch.ops.fa._exact_calls()
    out, lse = run_varlen(q, k, v, lens_q, lens_k, return_lse=True, **variants)
    what = f"{family} varlen {case} {dtype} d={d}: {describe(variants)}"
    assert torch.ops.fa._exact_calls() == before, f"{what}: took the exact path, not the kernel"
    assert_varlen_accurate(out, q, k, v, lens_q, lens_k, what, lse=lse, **variants)


# The Hopper kernel runs the visibility variants alone (window, alignment, key_mask, sinks, packed
# sequences) on the plain kernel's tiles: at d = 128 the 3-consumer one for non-causal calls from
# FA_SM90_LONG_NK keys (forced here: sm90_long_tile), at d = 64 the 3-consumer one but for short
# causal calls.
LONG_KEY_CASES = {
    "window_sym": lambda B, Nk, g: dict(window=(700, 300)),
    "window_right_only": lambda B, Nk, g: dict(window=(-1, 5)),
    "sinks": lambda B, Nk, g: dict(sinks=rand(g, 4, device="cuda") * 2),
    "key_mask_runs": lambda B, Nk, g: dict(key_mask=padding_mask(B, Nk, "cuda", left=True)),
    "key_mask_holes": lambda B, Nk, g: dict(key_mask=key_mask_rows(g, B, Nk, "cuda")),
    "softcap": lambda B, Nk, g: dict(softcap=20.0),          # the kernel with every variant, beside them
}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("case", list(LONG_KEY_CASES))
def test_visibility_variants_on_the_long_key_tiles(case, d, family, fa_overrides):
    use_family(family, fa_overrides)
    fa_overrides(sm90_long_tile="on")
    B, Hq, Hkv, Nq, Nk = 3, 4, 2, 333, 2100
    g = torch.Generator().manual_seed(seed_of("long keys", case, d))
    q, k, v = make_qkv(g, B, Hq, Hkv, Nq, Nk, d, torch.bfloat16, "cuda")
    variants = LONG_KEY_CASES[case](B, Nk, g)
    what = f"{family} {case} d={d}: {describe(variants)}"
    before = torch.ops.fa._exact_calls()
    out, lse = torch_flashattn.attention_lse(q, k, v, **variants)
    assert torch.ops.fa._exact_calls() == before, f"{what}: took the exact path, not the kernel"
    assert_variant_accurate(out, lse, q, k, v, what=what, **variants)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_long_key_varlen_in_the_kernel(causal, d, family, fa_overrides):
    """Packed sequences whose longest has 2300 keys, beside short ones; non-causal at d = 128 on the
    Hopper kernel's three-consumer tile (sm90_long_tile)."""
    use_family(family, fa_overrides)
    fa_overrides(sm90_long_tile="on")
    from test_variants import assert_varlen_accurate, run_varlen
    lens_q, lens_k = [200, 1, 450, 0], [2300, 700, 2049, 3]
    g = torch.Generator().manual_seed(seed_of("long key varlen", d, causal))
    q = rand(g, sum(lens_q), 4, d, dtype=torch.bfloat16, device="cuda")
    k, v = (rand(g, sum(lens_k), 2, d, dtype=torch.bfloat16, device="cuda") for _ in range(2))
    before = torch.ops.fa._exact_calls()
    out, lse = run_varlen(q, k, v, lens_q, lens_k, return_lse=True, causal=causal, causal_align="bottom_right")
    what = f"{family} long-key varlen d={d} causal={causal}"
    assert torch.ops.fa._exact_calls() == before, f"{what}: took the exact path, not the kernel"
    assert_varlen_accurate(out, q, k, v, lens_q, lens_k, what, lse=lse, causal=causal, causal_align="bottom_right")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("which", ["q", "k"])
@pytest.mark.parametrize("bad", ["decreasing", "not_from_zero", "overrun", "too_long", "negative"])
def test_varlen_bad_cu_seqlens_make_nan(which, bad, family, fa_overrides):
    """cu_seqlens on the GPU are never read on the host: when they break the rules (fa.h) the kernel
    writes NaN over the whole output and lse, and touches nothing outside them."""
    use_family(family, fa_overrides)
    g = torch.Generator().manual_seed(7)
    q = rand(g, 40, 4, 64, dtype=torch.bfloat16, device="cuda")
    k, v = (rand(g, 50, 2, 64, dtype=torch.bfloat16, device="cuda") for _ in range(2))
    good = {"q": [0, 10, 40], "k": [0, 20, 50]}
    total = {"q": 40, "k": 50}[which]
    good[which] = {"decreasing": [0, 30, 20] if which == "q" else [0, 40, 30], "not_from_zero": [5, 10, total],
                   "overrun": [0, 10, total + 7], "too_long": [0, 1, total], "negative": [0, -3, total]}[bad]
    cu_q, cu_k = (torch.tensor(good[n], dtype=torch.int32, device="cuda") for n in ("q", "k"))
    guard = torch.full((3, 1000), 7.0, device="cuda")
    before = torch.ops.fa._exact_calls()
    out, lse = torch_flashattn.attention_varlen(q, k, v, cu_q, cu_k, 30, 30, return_lse=True)
    torch.cuda.synchronize()
    assert torch.ops.fa._exact_calls() == before, "took the exact path, not the kernel"
    assert out.isnan().all() and lse.isnan().all(), f"{which} {bad}: not all NaN"
    assert (guard == 7.0).all()


@pytest.mark.parametrize("family", FAMILIES)
def test_varlen_rows_stay_in_their_sequence(family, fa_overrides):
    """Sequences whose last query tile ends inside the next sequences' rows (70, 5, 130 rows against
    64-row groups): each sequence's rows hold its own attention, not a neighbour's tail tile."""
    use_family(family, fa_overrides)
    from test_variants import assert_varlen_accurate
    g = torch.Generator().manual_seed(8)
    lens = [70, 5, 130]
    q, k, v = (rand(g, 205, 2, 128, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    cu = torch.tensor([0, 70, 75, 205], dtype=torch.int32, device="cuda")
    out = torch_flashattn.attention_varlen(q, k, v, cu, cu, 130, 130, causal=True)
    assert_varlen_accurate(out, q, k, v, lens, lens, f"{family} neighbours", causal=True)


@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", ["sinks", "softcap_window"])
def test_packed_walks_on_hopper(case, causal, d, fa_overrides):
    """Packed sequences on each walk of the Hopper kernel (packed_find): items from the counter
    (automatic), every grid-th item ("persistent") and one item per CTA ("tile"), over more query
    tiles than the GPU has SMs (48 sequences of 0-700 rows, one empty, 16 heads), so that CTAs
    cross heads and sequences. Each tile is computed the same way on every walk: the same bits."""
    use_family("sm90", fa_overrides)
    from test_variants import assert_varlen_accurate, run_varlen
    g = torch.Generator().manual_seed(seed_of("packed walks", case, causal, d))
    lens_q = [int(x) for x in torch.randint(0, 700, (48,), generator=g)]
    lens_q[3] = 0
    lens_k = [n + int(x) for n, x in zip(lens_q, torch.randint(0, 300, (48,), generator=g))]
    Hq, Hkv = 16, 4
    q = rand(g, sum(lens_q), Hq, d, dtype=torch.bfloat16, device="cuda")
    k, v = (rand(g, sum(lens_k), Hkv, d, dtype=torch.bfloat16, device="cuda") for _ in range(2))
    variants = dict(causal=causal, causal_align="bottom_right")
    variants.update(dict(sinks=rand(g, Hq, device="cuda")) if case == "sinks" else dict(softcap=20.0, window=(300, 40)))
    what = f"sm90 packed walks {case} causal={causal} d={d}"
    runs = {}
    for grid in ("auto", "persistent", "tile"):
        fa_overrides(sm90_grid=grid)
        before = torch.ops.fa._exact_calls()
        runs[grid], names = kernels_run(lambda: run_varlen(q, k, v, lens_q, lens_k, return_lse=True, **variants))
        assert torch.ops.fa._exact_calls() == before, f"{what} grid={grid}: took the exact path, not the kernel"
        ran = [n for n in names if "fa_sm90_forward_kernel" in n]
        assert len(ran) == 1, f"{what} grid={grid}: not one Hopper forward kernel: {ran}"
    for grid in ("persistent", "tile"):
        assert torch.equal(runs[grid][0], runs["auto"][0]), f"{what}: out differs on grid={grid}"
        assert torch.equal(runs[grid][1], runs["auto"][1]), f"{what}: lse differs on grid={grid}"
    assert_varlen_accurate(runs["auto"][0], q, k, v, lens_q, lens_k, what, lse=runs["auto"][1], **variants)


# ---- the KV cache's variants in the split-KV kernels ---------------------------------------------

DECODE_VARIANTS = {
    "sliding": lambda B, Hq, g: dict(window=(300, -1), causal=True),
    "window_both": lambda B, Hq, g: dict(window=(40, 7)),
    "softcap": lambda B, Hq, g: dict(softcap=5.0, causal=True),
    "alibi_batch": lambda B, Hq, g: dict(alibi_slopes=(torch.rand(B, Hq, generator=g) * 0.05).cuda()),
    "sinks": lambda B, Hq, g: dict(sinks=rand(g, Hq, device="cuda") + 2),
    "all": lambda B, Hq, g: dict(causal=True, window=(500, -1), softcap=20.0,
                                 alibi_slopes=(torch.rand(B, Hq, generator=g) * 0.02).cuda(),
                                 sinks=rand(g, Hq, device="cuda")),
}
# decode_splits / decode_cluster / decode_combine forced: one split (the attend kernel writes O),
# splits merged in a cluster (sm_90), by the element combine kernel, by the wide one.
DECODE_PLANS = {"one": dict(decode_splits=1), "cluster": dict(decode_splits=4, decode_cluster="on"),
                "combine": dict(decode_splits=5, decode_cluster="off", decode_combine="elem"),
                "wide": dict(decode_splits=30, decode_cluster="off", decode_combine="wide")}


@pytest.mark.parametrize("plan", list(DECODE_PLANS))
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("nq", [1, 5])
@pytest.mark.parametrize("case", list(DECODE_VARIANTS))
def test_kvcache_variants_in_the_split_kv_kernel(case, nq, dtype, d, plan, fa_overrides):
    """attention_kvcache's window, softcap, ALiBi and sinks in the split-KV kernel (no exact path),
    each way its splits end, on ragged caches (empty, shorter than the queries, long) with GQA."""
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("the split-KV tensor-core kernel needs compute capability 8.0")
    if plan == "cluster" and torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("thread block clusters need compute capability 9.0")
    from test_variants import assert_rule, kvcache_reference
    fa_overrides(**DECODE_PLANS[plan])
    B, Hq, Hkv, Nmax = 4, 8, 2, 2100
    g = torch.Generator().manual_seed(seed_of("decode", case, nq, d, plan))
    q = rand(g, B, Hq, nq, d, dtype=dtype, device="cuda")
    k_cache, v_cache = (rand(g, B, Hkv, Nmax, d, dtype=dtype, device="cuda") for _ in range(2))
    seqlens = [0, 3, 1337, Nmax]
    variants = DECODE_VARIANTS[case](B, Hq, g)
    before = torch.ops.fa._exact_calls()
    out = torch_flashattn.attention_kvcache(q, k_cache, v_cache, **variants,
                                            cache_seqlens=torch.tensor(seqlens, dtype=torch.int32, device="cuda"))
    what = f"decode {case} {plan} {dtype} nq={nq} d={d}: {describe(variants)}"
    assert torch.ops.fa._exact_calls() == before, f"{what}: took the exact path, not the kernel"
    ref = kvcache_reference(q, k_cache, v_cache, seqlens, **variants)
    pt = kvcache_reference(q, k_cache, v_cache, seqlens, as_pytorch=True, **variants)
    assert_rule(out, ref, pt, dtype, what)


def test_kvcache_variants_fp32_take_the_exact_path():
    """fp32 KV caches with variants: no split-KV kernel takes them; the exact path does, counted."""
    g = torch.Generator().manual_seed(9)
    q = rand(g, 2, 4, 1, 64, device="cuda")
    k_cache, v_cache = (rand(g, 2, 2, 100, 64, device="cuda") for _ in range(2))
    before = torch.ops.fa._exact_calls()
    torch_flashattn.attention_kvcache(q, k_cache, v_cache, window=(10, -1))
    assert torch.ops.fa._exact_calls() == before + 1


# ---- a padded batch's decoding step: attention calls on the split-KV kernel ------------------------

def kernels_run(fn):
    """fn's result and the names of the CUDA kernels it launched."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out = fn()
        torch.cuda.synchronize()
    return out, [e.name for e in prof.events()]


def ran_split_kv(names):
    return any("fa_decode_attend_kernel" in n for n in names)


def decode_key_mask(g, B, Nk, kind, device):
    """key_mask rows of a padded decoding step: left-padded (batch entry b keeps Nk − 37·b − 1 keys),
    random holes, and (kind "empty") a first entry that keeps none and a second that keeps all."""
    if kind == "holes":
        m = bernoulli(g, 0.7, B, Nk)
    else:
        m = padding_mask(B, Nk, "cpu", left=True)
    if kind == "empty":
        m[0] = False
        m[1] = True
    return m.to(device)


PADDED_DECODE = {
    "left_padded": lambda B, Hq, g: dict(causal=True, causal_align="bottom_right"),
    "empty_rows": lambda B, Hq, g: dict(),
    "holes_sinks": lambda B, Hq, g: dict(sinks=rand(g, Hq, device="cuda") + 1),
    "empty_rows_sinks": lambda B, Hq, g: dict(sinks=rand(g, Hq, device="cuda")),
    "softcap_alibi": lambda B, Hq, g: dict(causal=True, causal_align="bottom_right", softcap=8.0,
                                           alibi_slopes=(torch.rand(B, Hq, generator=g) * 0.05).cuda()),
    "sliding": lambda B, Hq, g: dict(causal=True, causal_align="bottom_right", window=(90, -1)),
    "window_both_int_mask": lambda B, Hq, g: dict(causal_align="bottom_right", window=(200, 3)),
}
MASK_KIND = {"empty_rows": "empty", "empty_rows_sinks": "empty", "holes_sinks": "holes"}


@pytest.mark.parametrize("plan", ["auto", "one", "cluster", "combine"])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("nq", [1, 4, 7])
@pytest.mark.parametrize("case", list(PADDED_DECODE))
def test_padded_decoding_step_on_the_split_kv_kernel(case, nq, d, plan, fa_overrides):
    """attention() with key_mask and one to eight queries per sequence (32 rows per KV head at most):
    the split-KV kernel runs it (the profiler sees its kernel), by FlashAttention's rule against the
    float64 reference, with each way its splits end; rows that keep no key are 0 (or the sink's)."""
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("the split-KV tensor-core kernel needs compute capability 8.0")
    if plan == "cluster" and torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("thread block clusters need compute capability 9.0")
    if plan != "auto":
        fa_overrides(**DECODE_PLANS[plan])
    B, Hq, Hkv, Nk, dtype = 5, 8, 2, 1400, torch.bfloat16
    g = torch.Generator().manual_seed(seed_of("padded decode", case, nq, d, plan))
    q, k, v = make_qkv(g, B, Hq, Hkv, nq, Nk, d, dtype, "cuda")
    variants = PADDED_DECODE[case](B, Hq, g)
    km = decode_key_mask(g, B, Nk, MASK_KIND.get(case, "left"), "cuda")
    variants["key_mask"] = km.to(torch.int32) if case.endswith("int_mask") else km
    what = f"padded decode {case} {plan} nq={nq} d={d}: {describe(variants)}"
    before = torch.ops.fa._exact_calls()
    (out, lse), names = kernels_run(lambda: torch_flashattn.attention_lse(q, k, v, **variants))
    assert torch.ops.fa._exact_calls() == before, f"{what}: took the exact path, not a kernel"
    assert ran_split_kv(names), f"{what}: the split-KV kernel did not run ({names})"
    assert_variant_accurate(out, lse, q, k, v, what=what, **variants)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(3, 6, 3, 2, 1, 80), (2, 4, 1, 3, 77, 40), (4, 2, 2, 1, 5000, 96)],
                         ids=lambda s: "B{}-H{}/{}-Nq{}-Nk{}-d{}".format(*s))
def test_padded_decoding_step_odd_shapes(shape, dtype):
    """Odd head dims, a single key, groups of 3 and 2, keys past one split: the automatic route."""
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("the split-KV tensor-core kernel needs compute capability 8.0")
    B, Hq, Hkv, nq, Nk, d = shape
    g = torch.Generator().manual_seed(seed_of("padded decode odd", *shape, str(dtype)))
    q, k, v = make_qkv(g, B, Hq, Hkv, nq, Nk, d, dtype, "cuda", layout="bnhd")
    variants = dict(causal=True, causal_align="bottom_right", key_mask=bernoulli(g, 0.8, B, Nk, device="cuda"),
                    sinks=rand(g, Hq, device="cuda"))
    what = f"padded decode {shape} {dtype}: {describe(variants)}"
    (out, lse), names = kernels_run(lambda: torch_flashattn.attention_lse(q, k, v, **variants))
    assert ran_split_kv(names), f"{what}: the split-KV kernel did not run"
    assert_variant_accurate(out, lse, q, k, v, what=what, **variants)


def test_which_decoding_steps_take_the_split_kv_kernel(fa_overrides):
    """The rule (plan.h, fa_plan_decode_variants) as calls see it: up to 32 query rows per KV head
    with variants, bottom-right or δ-free; more rows, a top-left causal diagonal, a mask tensor or
    split_kv "off" keep the forward kernels, and those agree with the split-KV kernel."""
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("the split-KV tensor-core kernel needs compute capability 8.0")
    g = torch.Generator().manual_seed(11)
    B, Hq, Hkv, Nk, d = 3, 8, 2, 700, 128
    km = padding_mask(B, Nk, "cuda", left=True)
    br = dict(causal=True, causal_align="bottom_right", key_mask=km)

    def runs(nq, **kw):
        q, k, v = make_qkv(g, B, Hq, Hkv, nq, Nk, d, torch.bfloat16, "cuda")
        out, names = kernels_run(lambda: torch_flashattn.attention(q, k, v, **kw))
        assert_variant_accurate(out, None, q, k, v, what=f"nq={nq} {describe(kw)}", **kw)
        return ran_split_kv(names)

    assert runs(1, **br) and runs(8, **br), "8 queries of a group of 4: two 16-row tiles"
    assert not runs(9, **br), "36 rows per KV head: the forward kernels"
    assert runs(1, key_mask=km), "top-left without causal, window or ALiBi: δ does not matter"
    assert runs(3, key_mask=km, alibi_slopes=alibi_heads(Hq, "cuda"), causal_align="bottom_right")
    assert not runs(3, causal=True, key_mask=km), "top-left causal with Nq < Nk: another diagonal"
    assert not runs(1, attn_mask=torch.ones(1, 1, 1, Nk, dtype=torch.bool, device="cuda")), "a mask tensor"
    fa_overrides(split_kv="off")
    assert not runs(1, **br), "split_kv off"
    fa_overrides(split_kv="on")
    assert runs(9, **br), "split_kv on: any number of rows"
    fa_overrides(split_kv="auto", family="sm90" if torch.cuda.get_device_capability() == (9, 0) else "sm80")
    assert not runs(1, **br), "a forced family runs itself"


@pytest.mark.parametrize("shape", [(4, 32, 8, 1, 3000, 128), (2, 8, 8, 3, 3, 64), (3, 12, 4, 8, 600, 256),
                                   (1, 4, 1, 2, 70000, 96)], ids=lambda s: "B{}-H{}/{}-Nq{}-Nk{}-d{}".format(*s))
@pytest.mark.parametrize("causal", [False, True])
def test_plain_decoding_step_on_the_split_kv_kernel(shape, causal):
    """Plain attention with at most 32 query rows per KV head runs the split-KV kernel (plan.h,
    FA_SPLIT_KV_MAX_ROWS) where its diagonal is the call's (non-causal, or Nq = Nk), else the
    forward kernels; both accurate."""
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("the split-KV tensor-core kernel needs compute capability 8.0")
    B, Hq, Hkv, nq, Nk, d = shape
    g = torch.Generator().manual_seed(seed_of("plain decode", *shape, causal))
    q, k, v = make_qkv(g, B, Hq, Hkv, nq, Nk, d, torch.bfloat16, "cuda")
    (out, lse), names = kernels_run(lambda: torch_flashattn.attention_lse(q, k, v, causal=causal))
    want = not causal or nq == Nk
    assert ran_split_kv(names) == want, f"{shape} causal={causal}: split-KV ran {ran_split_kv(names)}"
    assert_variant_accurate(out, lse, q, k, v, what=f"plain decode {shape} causal={causal}", causal=causal)


@pytest.mark.parametrize("grid", ["tile", "persistent", "pairs", "counter"])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("case", ["sliding_causal", "key_mask_left_padded_causal", "sinks_window", "softcap_causal",
                                  "alibi_causal", "causal_bottom_right", "combo"])
def test_variants_on_every_hopper_grid(case, d, grid, fa_overrides):
    """The Hopper kernel's variants on each grid (sm90_grid) forced, with more query tiles (336 of
    128 rows, 7 per head) than the GPU has SMs: persistent CTAs walk several tiles of different
    heads and key ranges (causal: the snake walk; "counter": the packed walk over the batch
    entries, where no key_mask or attn_mask keeps the call off it)."""
    use_family("sm90", fa_overrides)
    fa_overrides(sm90_grid=grid)
    B, Hq, Hkv, Nq, Nk = 3, 16, 4, 777, 1025
    g = torch.Generator().manual_seed(seed_of("grid", case, d))
    q, k, v = make_qkv(g, B, Hq, Hkv, Nq, Nk, d, torch.bfloat16, "cuda")
    variants = kernel_case(case, g, B, Hq, Nq, Nk, torch.bfloat16, "cuda")
    what = f"sm90 grid={grid} {case} d={d}: {describe(variants)}"
    before = torch.ops.fa._exact_calls()
    out, lse = torch_flashattn.attention_lse(q, k, v, **variants)
    assert torch.ops.fa._exact_calls() == before, f"{what}: took the exact path, not the kernel"
    assert_variant_accurate(out, lse, q, k, v, what=what, **variants)


def packed_walk(names):
    """Whether the one Hopper forward kernel among names is a PACKED one (its template's fifth
    argument: ..., SPLIT, VAR, PACKED, EXTRA>)."""
    ran = [n for n in names if "fa_sm90_forward_kernel" in n]
    assert len(ran) == 1, f"not one Hopper forward kernel: {ran}"
    found = re.findall(r", (true|false), (\d+), (true|false), (\d+)>", ran[0])
    assert found, f"no template arguments in {ran[0]}"
    return found[-1][2] == "true"


@pytest.mark.parametrize("B, N, left, d, align, walk", [(4, 4096, 1024, 64, "top_left", True),
                                                        (8, 2048, 512, 64, "bottom_right", True),
                                                        (3, 700, 96, 64, "top_left", True),
                                                        (4, 4096, 1024, 128, "top_left", False),
                                                        (1, 6000, 4200, 128, "bottom_right", True),
                                                        (16, 1024, 512, 128, "top_left", "132 SMs"),
                                                        (1, 6000, 4200, 256, "top_left", False)])
def test_causal_windows_on_the_packed_walk(B, N, left, d, align, walk, fa_overrides):
    """Causal windows without key_mask or attn_mask run on the packed kernels' walk, the batch
    entries as sequences, each CTA taking its query tiles from a counter (fa_plan_sm90_counter), at
    d = 64, and at d = 128 on windows of more than 4096 keys or where the persistent snake would be
    uneven (a modelled figure that depends on the SM count: (512, 0) over 16 × 1k takes the walk on
    132 SMs, not on 114); the others on the grids. Every walk computes each tile alike: out and lse
    equal bit for bit on every grid, "counter" forced, and replayed in a CUDA graph (the counter
    zeroed in the graph); the automatic call against the reference on a few heads."""
    use_family("sm90", fa_overrides)
    if walk == "132 SMs":
        walk = torch.cuda.get_device_properties(0).multi_processor_count == 132
    H = 2048 // d
    g = torch.Generator().manual_seed(seed_of("counter walk", B, N, left, d, align))
    q, k, v = make_qkv(g, B, H, H, N, N, d, torch.bfloat16, "cuda")
    variants = dict(causal=True, causal_align=align, window=(left, -1))
    what = f"window ({left}, 0) {align} d={d} {B}x{N}"
    runs = {}
    for grid in ("auto", "tile", "persistent", "counter"):
        fa_overrides(sm90_grid=grid)
        before = torch.ops.fa._exact_calls()
        runs[grid], names = kernels_run(lambda: torch_flashattn.attention_lse(q, k, v, **variants))
        assert torch.ops.fa._exact_calls() == before, f"{what} grid={grid}: took the exact path, not the kernel"
        assert packed_walk(names) == (grid == "counter" or (grid == "auto" and walk)), f"{what} grid={grid}: {names}"
    for grid in ("tile", "persistent", "counter"):
        assert torch.equal(runs[grid][0], runs["auto"][0]), f"{what}: out differs between grid={grid} and auto"
        assert torch.equal(runs[grid][1], runs["auto"][1]), f"{what}: lse differs between grid={grid} and auto"
    fa_overrides(sm90_grid="auto")
    out = torch.full_like(runs["auto"][0], float("nan"))
    torch_flashattn.attention(q, k, v, **variants)       # warm up outside the graph
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out.copy_(torch_flashattn.attention(q, k, v, **variants))
    for _ in range(2):
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, runs["auto"][0]), f"{what}: a graph replay differs"
    heads = slice(0, 2)
    assert_variant_accurate(runs["auto"][0][:1, heads], runs["auto"][1][:1, heads], q[:1, heads], k[:1, heads],
                            v[:1, heads], what=what, **variants)


@pytest.mark.parametrize("B, Nq, Nk, d, sinks, walk", [(1, 4100, 4100, 128, False, True),
                                                         (2, 4096, 4096, 128, False, False),
                                                         (1, 4100, 4100, 96, True, True),
                                                         (1, 300, 5000, 128, False, False),
                                                         (1, 5000, 5000, 64, False, False)])
def test_long_causal_calls_on_the_packed_walk(B, Nq, Nk, d, sinks, walk, fa_overrides):
    """Causal calls at 64 < d <= 128 with no variant, or with sinks alone, whose rows see more than
    4096 keys run the visibility-variant kernel on the packed walk, the batch entries as sequences
    (fa_plan_sm90_causal_counter); the others (4096 keys, 300 top-left queries over 5000 keys, d = 64)
    the plain kernel. "counter" forced takes the walk at any length, with the automatic call's bits
    where that takes it too; a sink of −inf keeps the plain call's bits; the automatic call against
    the reference on a few heads."""
    use_family("sm90", fa_overrides)
    H = 2048 // d
    g = torch.Generator().manual_seed(seed_of("long causal walk", B, Nq, Nk, d))
    q, k, v = make_qkv(g, B, H, H, Nq, Nk, d, torch.bfloat16, "cuda")
    variants = dict(causal=True)
    if sinks:
        variants["sinks"] = torch.randn(H, generator=g).mul(3).to("cuda")
    what = f"causal {B}x{Nq}x{Nk} d={d} sinks={sinks}"
    runs = {}
    for grid in ("auto", "counter"):
        fa_overrides(sm90_grid=grid)
        before = torch.ops.fa._exact_calls()
        runs[grid], names = kernels_run(lambda: torch_flashattn.attention_lse(q, k, v, **variants))
        assert torch.ops.fa._exact_calls() == before, f"{what} grid={grid}: took the exact path, not the kernel"
        assert packed_walk(names) == (walk or (grid == "counter" and d > 64)), f"{what} grid={grid}: {names}"
    if walk:
        assert torch.equal(runs["counter"][0], runs["auto"][0]), f"{what}: out differs between counter and auto"
        assert torch.equal(runs["counter"][1], runs["auto"][1]), f"{what}: lse differs between counter and auto"
    fa_overrides(sm90_grid="auto")
    none = torch_flashattn.attention_lse(q, k, v, causal=True, sinks=torch.full((H,), float("-inf"), device="cuda"))
    plain = torch_flashattn.attention_lse(q, k, v, causal=True)
    assert torch.equal(none[0], plain[0]), f"{what}: −inf sinks changed the output bits"
    heads = slice(0, 2)
    sub = dict(variants, sinks=variants["sinks"][heads]) if sinks else variants
    assert_variant_accurate(runs["auto"][0][:1, heads], runs["auto"][1][:1, heads], q[:1, heads], k[:1, heads],
                            v[:1, heads], what=what, **sub)


@pytest.mark.parametrize("B, Hq, Hkv, Nq, Nk, d, dtype", [(1, 4, 2, 4100, 4100, 128, torch.bfloat16),
                                                        (2, 4, 4, 1100, 1300, 96, torch.float16)])
def test_causal_walk_on_the_three_consumer_tile(B, Hq, Hkv, Nq, Nk, d, dtype, fa_overrides):
    """sm90_long_tile forced on runs the counter walk's causal calls (automatic past 4096 keys a row
    sees, or "counter" forced) on the 3-consumer 80-key tile: that tile's packed kernel, within the
    accuracy rule, the lse too."""
    use_family("sm90", fa_overrides)
    g = torch.Generator().manual_seed(seed_of("causal walk 3 consumers", B, Nq, Nk, d))
    q, k, v = make_qkv(g, B, Hq, Hkv, Nq, Nk, d, dtype, "cuda")
    fa_overrides(sm90_grid="auto" if Nq > 4096 else "counter", sm90_long_tile="on")
    (out, lse), names = kernels_run(lambda: torch_flashattn.attention_lse(q, k, v, causal=True))
    what = f"causal {B}x{Hq}/{Hkv}x{Nq}x{Nk} d={d} {dtype} on the 3-consumer walk"
    assert packed_walk(names), f"{what}: {names}"
    assert any("sm90_tile<128, 80, 2, 3, 1>" in n for n in names), f"{what}: {names}"
    kv = 2 * Hkv // Hq                                  # query heads 0 and 1, and their KV heads
    assert_variant_accurate(out[:, :2], lse[:, :2], q[:, :2], k[:, :kv], v[:, :kv], what=what, causal=True)


def consumers(names):
    """The consumer warpgroups of the one Hopper forward kernel among names (its tile's template
    arguments: sm90_tile<D, BN, STAGES, CONSUMERS, PINGPONG>)."""
    ran = [n for n in names if "fa_sm90_forward_kernel" in n]
    assert len(ran) == 1, f"not one Hopper forward kernel: {ran}"
    found = re.findall(r"sm90_tile<64, \d+, \d+, (\d), \d>", ran[0])
    assert found, f"no d = 64 tile in {ran[0]}"
    return int(found[0])


@pytest.mark.parametrize("tile", ["off", "on"])
@pytest.mark.parametrize("case", ["plain_causal", "sliding_causal", "sliding_causal_bottom_right", "window_sym",
                                  "window_right_only", "sinks_window", "alibi_causal", "softcap_causal",
                                  "key_mask_left_padded_causal", "softcap_visibility"])
def test_d64_calls_on_either_tile(case, tile, fa_overrides):
    """d = 64 calls (the plain kernel and every variant kernel but attn_mask's, which has the
    2-consumer tile alone) on the 3-consumer 192-row tile ("off") and the 2-consumer 128-row one
    ("on"), as sm90_short_tile forces: the tile named in the kernel run, the result accurate.
    1500 query rows: the automatic rule would take the 3-consumer tile for causal calls."""
    use_family("sm90", fa_overrides)
    fa_overrides(sm90_short_tile=tile)
    B, Hq, Hkv, Nq, Nk = 2, 4, 2, 1500, 1500
    g = torch.Generator().manual_seed(seed_of("d64 tile", case, tile))
    q, k, v = make_qkv(g, B, Hq, Hkv, Nq, Nk, 64, torch.bfloat16, "cuda")
    variants = dict(causal=True) if case == "plain_causal" else kernel_case(case, g, B, Hq, Nq, Nk, torch.bfloat16,
                                                                            "cuda")
    what = f"sm90_short_tile={tile} {case}: {describe(variants)}"
    before = torch.ops.fa._exact_calls()
    (out, lse), names = kernels_run(lambda: torch_flashattn.attention_lse(q, k, v, **variants))
    assert torch.ops.fa._exact_calls() == before, f"{what}: took the exact path, not the kernel"
    assert consumers(names) == (2 if tile == "on" else 3), f"{what}: {names}"
    assert_variant_accurate(out, lse, q, k, v, what=what, **variants)


HUGE_SCORE_CASES = {
    # the visibility variants: the scores reach the softmax raw (scale · log2 e in c), as the plain
    # kernel's; with a bool attn_mask too
    "sliding_causal": lambda Nq, Nk, dev: dict(causal=True, window=(96, -1)),
    "key_mask": lambda Nq, Nk, dev: dict(key_mask=(torch.arange(Nk, device=dev) % 5 != 3)[None]),
    "causal_bottom_right": lambda Nq, Nk, dev: dict(causal=True, causal_align="bottom_right"),
    "bool_attn_mask": lambda Nq, Nk, dev: dict(attn_mask=(torch.arange(Nq, device=dev)[:, None]
                                                          + torch.arange(Nk, device=dev)[None, :]) % 3 != 1),
    # ALiBi beside a window: scores in log2 units (c = 1)
    "window_alibi": lambda Nq, Nk, dev: dict(window=(96, 96), alibi_slopes=alibi_heads(4, dev)),
}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("target", [4.008e8, 1e10], ids=lambda t: f"scores_{t:.0e}")
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("case", list(HUGE_SCORE_CASES))
def test_huge_scores_variant_kernels(case, d, target, dtype, family, fa_overrides):
    """The variant kernels at scores of 4e8 and 1e10 (README Limits), as test_values'
    test_huge_scores_plain_kernels for the plain ones: q, k, v randn (1, 4, Nq, d) and (1, 4, 512, d)
    (Nq = 384 bottom-right, else 512), a planted largest score (head 1, row 300 against key 250, which
    every case shows it: q · k = 6.25 d exactly), scale = target / the largest |q · k|. Past
    |m · c| = 2^20 (log2 units) each exponent is taken relative to m · c itself; one-fma exponents
    gave fp16 rows of inf or NaN from 4e8. Every row finite; the softmax is one-hot, so out against
    the float64 reference within two of the dtype's rounding steps at v's magnitude (rows whose two
    largest visible q · k lie within 1e-3, which fp32 sums may order either way, for finiteness
    only; rows that see no key are 0 in both); lse within 1e-5 of the larger of |lse| and the row's
    largest scale · Σ_i |q_i k_i|."""
    use_family(family, fa_overrides)
    torch.manual_seed(seed_of("huge", case, d))
    Nq, Nk = (384 if case == "causal_bottom_right" else 512), 512
    q = torch.randn(1, 4, Nq, d, device="cuda").to(dtype)
    k, v = (torch.randn(1, 4, Nk, d, device="cuda").to(dtype) for _ in range(2))
    q[0, 1, 300] = 2.5
    k[0, 1, 250] = 2.5
    variants = HUGE_SCORE_CASES[case](Nq, Nk, "cuda")
    raw = q.double() @ k.double().transpose(-1, -2)
    scale = target / raw.abs().max().item()
    what = f"{family} {dtype} d={d} {case} scores {target:.3g} (scale {scale:.4g})"
    before = torch.ops.fa._exact_calls()
    out, lse = torch_flashattn.attention_lse(q, k, v, scale=scale, **variants)
    assert torch.ops.fa._exact_calls() == before, f"{what}: took the exact path, not the kernel"
    rows_bad = (~torch.isfinite(out).all(-1)).sum().item()
    assert rows_bad == 0, f"{what}: {rows_bad} rows with inf or NaN"
    visible = variant_visible(1, 4, Nq, Nk, "cuda", **{n: x for n, x in variants.items() if n != "alibi_slopes"})
    top2 = raw.masked_fill(~visible, float("-inf")).topk(2, dim=-1).values
    clear = (top2[..., 0] - top2[..., 1] > 1e-3) | (top2[..., 1] == float("-inf"))
    assert clear.float().mean().item() > 0.95
    ref, ref_lse = variant_reference(q, k, v, scale=scale, **variants)
    err = (out.double() - ref).abs().amax(-1)
    tol = 2 * torch.finfo(dtype).eps * v.abs().max().item()
    worst = err[clear].max().item()
    zero = ((out == 0).all(-1) & clear & (top2[..., 0] > float("-inf"))).sum().item()
    assert worst <= tol, f"{what}: max error {worst:.3e} > {tol:.3e} ({zero} rows all 0)"
    sees = ref_lse.isfinite()
    assert torch.equal(lse.isfinite(), sees), f"{what}: lse finite where the reference's is not, or the reverse"
    # Relative to the row's largest scale · Σ_i |q_i k_i| too: a score's fp32 sum errs by a multiple of
    # it, and a row's largest score may be far below it (a row of few keys: the C backend's lse then
    # erred 1.3e-4 of |lse| and 1.6e-7 of this).
    mag = (q.double().abs() @ k.double().abs().transpose(-1, -2)).masked_fill(~visible, 0).amax(-1) * scale
    lse_err = ((lse.double() - ref_lse).abs() / torch.maximum(ref_lse.abs(), mag).clamp(min=1))[sees].max().item()
    assert lse_err <= 1e-5, f"{what}: lse relative error {lse_err:.3e}"
