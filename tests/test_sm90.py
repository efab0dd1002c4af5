"""The Hopper kernel (csrc/cuda/sm90.cu) forced with the sm90 family override, so that a silent fallback to the
sm_80 kernel cannot pass for it. Runs only on compute capability 9.0; elsewhere the forced family
must refuse with a clear error."""
import pytest
import torch

import torch_flashattn
from conftest import HAS_CUDA, assert_accurate, randn, reference_lse
from torch_flashattn._testing import overrides

IS_SM90 = HAS_CUDA and torch.cuda.get_device_capability() == (9, 0)
sm90 = pytest.mark.skipif(not IS_SM90, reason="needs a compute capability 9.0 GPU")
pytestmark = pytest.mark.gpu

DTYPES = [torch.float16, torch.bfloat16]
# d: every compiled width, widths padded up to them (rows stay 16-byte aligned: d % 8 == 0).
HEAD_DIMS = [8, 40, 64, 72, 96, 128, 136, 200, 256]
# (Nq, Nk): single rows, tile tails, Nq != Nk both ways, several key blocks.
SEQ_LENS = [(1, 1), (1, 700), (63, 65), (128, 128), (129, 257), (300, 77), (1000, 1000)]


@pytest.fixture
def forced(fa_overrides):
    fa_overrides(family="sm90")


@sm90
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("nq,nk", SEQ_LENS)
@pytest.mark.parametrize("causal", [False, True])
def test_sm90_matches_sdpa(dtype, d, nq, nk, causal, forced):
    torch.manual_seed(nq * 7 + nk + d)
    q = randn(2, 4, nq, d, dtype=dtype, device="cuda")
    k = randn(2, 2, nk, d, dtype=dtype, device="cuda")
    v = randn(2, 2, nk, d, dtype=dtype, device="cuda")
    out = torch_flashattn.attention(q, k, v, causal=causal)
    assert_accurate(out, q, k, v, causal, what=f"sm90 {dtype} d={d} Nq={nq} Nk={nk} causal={causal}")


@sm90
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_sm90_lse_and_layouts(dtype, causal, d, forced):
    """forward_lse, a (B, N, H, d) transposed view, MQA, and a large-logit scale."""
    torch.manual_seed(d)
    B, H, N = 2, 8, 517
    q = randn(B, N, H, d, dtype=dtype, device="cuda").transpose(1, 2)
    k = randn(B, N, 1, d, dtype=dtype, device="cuda").transpose(1, 2)
    v = randn(B, N, 1, d, dtype=dtype, device="cuda").transpose(1, 2)
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal, scale=0.5)
    assert_accurate(out, q, k, v, causal, scale=0.5, what="sm90 layouts")
    err = (lse.double() - reference_lse(q, k, causal, scale=0.5)).abs().max().item()
    assert err < 1e-4, f"lse max error {err:.3e}"
    assert torch.equal(out, torch_flashattn.attention(q, k, v, causal=causal, scale=0.5))


def check_gqa_lse(dtype, d, nq, nk, causal, what):
    """B = 2, 4 query heads on 2 KV heads, default scale: out within the accuracy rule and lse
    within 1e-4 of the float64 reference."""
    torch.manual_seed(nq + nk + d)
    q = randn(2, 4, nq, d, dtype=dtype, device="cuda")
    k = randn(2, 2, nk, d, dtype=dtype, device="cuda")
    v = randn(2, 2, nk, d, dtype=dtype, device="cuda")
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal)
    assert_accurate(out, q, k, v, causal, what=what)
    err = (lse.double() - reference_lse(q, k, causal)).abs().max().item()
    assert err < 1e-4, f"lse max error {err:.3e}"


@sm90
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("d", [72, 128])
@pytest.mark.parametrize("nq,nk", [(1, 2048), (193, 2049), (385, 5000), (129, 2047)])
@pytest.mark.parametrize("grid", ["tile", "persistent"], ids=["one_cta_per_tile", "persistent"])
def test_sm90_long_keys_tile(dtype, d, nq, nk, grid, forced, fa_overrides):
    """Non-causal from FA_SM90_LONG_NK (2048) keys at d <= 128 runs the 3-consumer tile (192 query
    rows, 80-key blocks): key block tails (2049 = 25 · 80 + 49, 5000 = 62 · 80 + 40), query tile
    tails (193 = 192 + 1, 385 = 2 · 192 + 1), one query row, the 2-consumer tile just below the
    switch, GQA, lse, both grids."""
    fa_overrides(sm90_grid=grid)
    check_gqa_lse(dtype, d, nq, nk, False, f"sm90 long-key tile {dtype} d={d} Nq={nq} Nk={nk}")


@sm90
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("d", [96, 128])
@pytest.mark.parametrize("nq,nk", [(4096, 4096), (4100, 4100), (129, 4097), (300, 4095)])
@pytest.mark.parametrize("grid", ["tile", "persistent", "pairs"], ids=["one_cta_per_tile", "persistent", "pairs"])
def test_sm90_causal_long_tile(dtype, d, nq, nk, grid, forced, fa_overrides):
    """Causal from FA_SM90_FENCE_NK (4096) keys at d <= 128 runs the 2-consumer tile with the
    softmax fence (sm90_tile_fenced): whole and partial 128-row tiles and key blocks (4100 =
    32 · 128 + 4), fewer queries than keys, the plain tile just below the switch, GQA, lse, both
    grids."""
    fa_overrides(sm90_grid=grid)
    check_gqa_lse(dtype, d, nq, nk, True, f"sm90 causal long tile {dtype} d={d} Nq={nq} Nk={nk}")


@sm90
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("d,nk", [(64, 1000), (128, 2500), (128, 1500), (256, 700)])
@pytest.mark.parametrize("tail", [0, 2, 3, 4, 1], ids=["auto", "2", "3", "4", "off"])
def test_sm90_split_last_round(dtype, d, nk, tail, forced, fa_overrides):
    """The persistent grid's last, partly filled round split along the keys (sm90_tail: the rule,
    2-4 parts forced, 1 off) and merged: 8 heads of 3500 query rows are 152 tiles of 192 rows
    (d = 64, and d = 128 from 2k keys) or 224 of 128 (d = 128 below 2k keys, d = 256), so a tail
    on 132 SMs. Only the d = 128 three-consumer tile (2500 keys) splits; the others take the
    override and run their tiles whole. Key block tails, GQA, lse."""
    fa_overrides(sm90_grid="persistent", sm90_tail=tail)
    check_gqa_lse(dtype, d, 3500, nk, False, f"sm90 split last round {dtype} d={d} Nk={nk} parts={tail}")


@sm90
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("d,B,hq,hkv,nq,nk", [(64, 4, 6, 2, 1000, 1000), (128, 4, 8, 2, 1000, 2048),
                                              (128, 2, 16, 4, 2500, 2500)])
@pytest.mark.parametrize("tail", [0, 1], ids=["auto", "off"])
def test_sm90_last_query_tiles_moved(dtype, d, B, hq, hkv, nq, nk, tail, forced, fa_overrides):
    """Each head's last query tile has rows for one warpgroup of three (1000 = 5 · 192 + 40,
    2500 = 13 · 192 + 4): the other two compute nothing, and on 132 SMs the persistent walk takes
    those tiles last (sm90_walk_plan); at d = 128 the rule also splits the whole tiles of the last
    round (sm90_tail=1: not). GQA, lse."""
    fa_overrides(sm90_tail=tail)
    torch.manual_seed(nq + nk + d)
    q = randn(B, hq, nq, d, dtype=dtype, device="cuda")
    k = randn(B, hkv, nk, d, dtype=dtype, device="cuda")
    v = randn(B, hkv, nk, d, dtype=dtype, device="cuda")
    out, lse = torch_flashattn.attention_lse(q, k, v)
    assert_accurate(out, q, k, v, what=f"sm90 last query tiles moved {dtype} d={d} Nq={nq} Nk={nk} tail={tail}")
    err = (lse.double() - reference_lse(q, k, False)).abs().max().item()
    assert err < 1e-4, f"lse max error {err:.3e}"


@sm90
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("d", [40, 64])
@pytest.mark.parametrize("nq,nk", [(1024, 1024), (1025, 1025), (700, 2000), (1000, 300)])
@pytest.mark.parametrize("grid", ["tile", "persistent", "pairs"], ids=["one_cta_per_tile", "persistent", "pairs"])
def test_sm90_d64_short_causal_tile(dtype, d, nq, nk, grid, forced, fa_overrides):
    """Causal at d <= 64 up to FA_SM90_D64_SHORT_CAUSAL (1024) query rows runs the 2-consumer tile,
    past it the 3-consumer one: both sides of the switch, more keys than queries and fewer, GQA,
    lse, both grids."""
    fa_overrides(sm90_grid=grid)
    check_gqa_lse(dtype, d, nq, nk, True, f"sm90 d64 causal {dtype} d={d} Nq={nq} Nk={nk}")


@sm90
@pytest.mark.parametrize("grid", ["tile", "persistent", "pairs"], ids=["one_cta_per_tile", "persistent", "pairs"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_sm90_both_grids(grid, causal, d, forced, fa_overrides):
    """Each grid (sm90_grid) forced on shapes with more query tiles than the GPU has SMs, so that
    persistent CTAs walk several tiles of different heads and lengths (the K/V ring and the Q
    buffers running on across them; causal, the snake walk), with GQA, tails and lse."""
    fa_overrides(sm90_grid=grid)
    torch.manual_seed(d + int(causal))
    for B, Hq, Hkv, nq, nk in [(3, 16, 4, 777, 1025), (2, 12, 3, 1500, 1500), (1, 4, 4, 4100, 300)]:
        q = randn(B, Hq, nq, d, dtype=torch.bfloat16, device="cuda")
        k = randn(B, Hkv, nk, d, dtype=torch.bfloat16, device="cuda")
        v = randn(B, Hkv, nk, d, dtype=torch.bfloat16, device="cuda")
        out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal)
        what = f"sm90 grid={grid} d={d} B={B} H={Hq}/{Hkv} Nq={nq} Nk={nk} causal={causal}"
        assert_accurate(out, q, k, v, causal, what=what)
        err = (lse.double() - reference_lse(q, k, causal)).abs().max().item()
        assert err < 1e-4, f"{what}: lse max error {err:.3e}"


@sm90
@pytest.mark.parametrize("grid", ["tile", "persistent", "pairs"], ids=["one_cta_per_tile", "persistent", "pairs"])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_sm90_causal_sections(grid, d, forced, fa_overrides):
    """Causal tiles walked in sections of G heads rank by rank (sm90_heads; automatic: on one CTA
    per tile, sections of K and V within 32 MB): 30 heads (B = 3, Hq = 10 on 5 KV heads) in
    sections of 1, 2, 3, 5 (G = 4 and 7 round down to divisors of 30), all 30 and the automatic
    choice give the same bits, within the accuracy rule; a window and sinks (the variant kernel)
    the same bits in every section too."""
    torch.manual_seed(d)
    q = randn(3, 10, 1100, d, dtype=torch.bfloat16, device="cuda")
    k = randn(3, 5, 1100, d, dtype=torch.bfloat16, device="cuda")
    v = randn(3, 5, 1100, d, dtype=torch.bfloat16, device="cuda")
    sinks = torch.randn(10, device="cuda")
    runs = {}
    for heads in (1, 0, 2, 3, 4, 5, 7, 30):
        fa_overrides(sm90_grid=grid, sm90_heads=heads)
        runs[heads] = (torch_flashattn.attention_lse(q, k, v, causal=True),
                       torch_flashattn.attention(q, k, v, causal=True, window=(300, 0), sinks=sinks))
    (out, lse), var = runs[1]
    assert_accurate(out, q, k, v, True, what=f"sm90 causal sections d={d} {grid}")
    for heads, ((o, l), w) in runs.items():
        assert torch.equal(o, out) and torch.equal(l, lse), f"sections of {heads} heads: other bits"
        assert torch.equal(w, var), f"sections of {heads} heads, window and sinks: other bits"


# Sinks alone run on the plain tiles' SINK kernels (sm90.cu, sm90_sinks_alone), each row ending with
# its head's sink in the denominator: (B, Hq, Hkv, Nq, Nk, d, causal) for each plain tile.
PLAIN_SINK_SHAPES = {
    "d64_short_causal": (2, 4, 2, 700, 700, 64, True),
    "d64_three_consumers": (2, 4, 2, 1500, 1500, 64, True),
    "d128": (2, 4, 2, 777, 1025, 128, True),
    "d128_causal_fenced": (1, 4, 2, 4200, 4200, 128, True),
    "d128_long_keys": (2, 4, 2, 3500, 2500, 128, False),      # 152 tiles: a last round the rule splits
    "d256": (2, 4, 2, 600, 900, 256, False),
}


@sm90
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", list(PLAIN_SINK_SHAPES))
@pytest.mark.parametrize("grid", ["auto", "tile", "split"])
def test_sm90_sinks_on_the_plain_tiles(dtype, shape, grid, forced, fa_overrides):
    """Sinks without other variants on each plain tile (GQA, tails, lse) against the float64
    reference: the automatic grid, one CTA per tile, and the persistent grid with its last round
    split in 3 (sm90_tail; the tile that splits: d128_long_keys), where the merge adds the sink. A
    sink of −inf adds nothing: the plain call's output bits, its lse within a float's rounding (the
    plain row end fuses m · c into m · c + log2 l)."""
    from test_variants import assert_variant_accurate
    fa_overrides(**({"sm90_grid": "persistent", "sm90_tail": 3} if grid == "split" else {"sm90_grid": grid}))
    B, Hq, Hkv, nq, nk, d, causal = PLAIN_SINK_SHAPES[shape]
    torch.manual_seed(nq + nk + d)
    q = randn(B, Hq, nq, d, dtype=dtype, device="cuda")
    k = randn(B, Hkv, nk, d, dtype=dtype, device="cuda")
    v = randn(B, Hkv, nk, d, dtype=dtype, device="cuda")
    sinks = torch.randn(Hq, device="cuda") * 3
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal, sinks=sinks)
    what = f"sm90 sinks {shape} {dtype} grid={grid}"
    assert_variant_accurate(out, lse, q, k, v, what=what, causal=causal, sinks=sinks)
    none = torch_flashattn.attention_lse(q, k, v, causal=causal, sinks=torch.full((Hq,), float("-inf"), device="cuda"))
    plain = torch_flashattn.attention_lse(q, k, v, causal=causal)
    assert torch.equal(none[0], plain[0]), f"{what}: −inf sinks changed the output bits"
    torch.testing.assert_close(none[1], plain[1], rtol=1e-6, atol=1e-6, msg=f"{what}: −inf sinks moved the lse")


@sm90
@pytest.mark.parametrize("causal,nq,nk", [(True, 1000, 1000), (False, 500, 1300)])
def test_sm90_alignment_that_moves_nothing_is_plain(causal, nq, nk, forced):
    """causal_align="bottom_right" where it moves no key (δ = Nk − Nq = 0, or not causal): the plain
    kernel's bits, with and without sinks."""
    torch.manual_seed(nq)
    q = randn(2, 4, nq, 128, dtype=torch.bfloat16, device="cuda")
    k = randn(2, 2, nk, 128, dtype=torch.bfloat16, device="cuda")
    v = randn(2, 2, nk, 128, dtype=torch.bfloat16, device="cuda")
    sinks = torch.randn(4, device="cuda")
    for kw in ({}, {"sinks": sinks}):
        top = torch_flashattn.attention_lse(q, k, v, causal=causal, **kw)
        right = torch_flashattn.attention_lse(q, k, v, causal=causal, causal_align="bottom_right", **kw)
        assert torch.equal(right[0], top[0]) and torch.equal(right[1], top[1]), kw


@sm90
def test_sm90_many_heads_and_scale_zero(forced):
    """More CTAs than one launch row of work, and scale 0 (uniform weights)."""
    q = randn(64, 32, 130, 64, dtype=torch.bfloat16, device="cuda")
    k = randn(64, 8, 130, 64, dtype=torch.bfloat16, device="cuda")
    v = randn(64, 8, 130, 64, dtype=torch.bfloat16, device="cuda")
    assert_accurate(torch_flashattn.attention(q, k, v, causal=True), q, k, v, True, what="sm90 B·H=2048")
    assert_accurate(torch_flashattn.attention(q, k, v, scale=0.0), q, k, v, scale=0.0, what="sm90 scale 0")


@sm90
def test_sm90_refuses_what_it_does_not_take(forced, fa_overrides):
    """Forced, the kernel refuses (rows not 16-byte aligned, negative scale, fp32); under auto the
    same problems run on another family and are exact."""
    q = randn(1, 2, 50, 20, dtype=torch.float16, device="cuda")      # 40-byte rows
    for args, kw in (((q, q, q), {}), ((q[..., :16].contiguous(),) * 3, {"scale": -0.3})):
        with pytest.raises(RuntimeError, match="not supported|unsupported"):
            torch_flashattn.attention(*args, **kw)
        with overrides(family="auto"):
            assert_accurate(torch_flashattn.attention(*args, **kw), *args, what="auto fallback", **kw)


@pytest.mark.skipif(not HAS_CUDA or IS_SM90, reason="needs a CUDA GPU other than compute capability 9.0")
def test_sm90_refused_elsewhere(forced):
    q = randn(1, 1, 8, 64, dtype=torch.float16, device="cuda")
    with pytest.raises(RuntimeError, match="not supported|unsupported"):
        torch_flashattn.attention(q, q, q)
