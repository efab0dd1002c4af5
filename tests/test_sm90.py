"""The Hopper kernel (csrc/cuda/sm90.cu) forced with the sm90 family override, so that a silent fallback to the
sm_80 kernel cannot pass for it. Runs only on compute capability 9.0; elsewhere the forced family
must refuse with a clear error."""
import math

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
@pytest.mark.parametrize("nq,nk", [(1, 2048), (193, 2049), (385, 5000), (129, 2047), (97, 8193)])
@pytest.mark.parametrize("grid", ["tile", "persistent"], ids=["one_cta_per_tile", "persistent"])
@pytest.mark.parametrize("tile", ["on", "off", "auto"])
def test_sm90_long_keys_tile(dtype, d, nq, nk, grid, tile, forced, fa_overrides):
    """Non-causal at d <= 128 on the 3-consumer tile (192 query rows, 80-key blocks; sm90_long_tile
    "on", and "auto" from FA_SM90_LONG_NK = 8192 keys) and on the 2-consumer one ("off", and "auto"
    below): key block tails (2049 = 25 · 80 + 49, 5000 = 62 · 80 + 40, 8193 = 102 · 80 + 33), query
    tile tails (193 = 192 + 1, 385 = 2 · 192 + 1), one query row, GQA, lse, both grids."""
    fa_overrides(sm90_grid=grid, sm90_long_tile=tile)
    check_gqa_lse(dtype, d, nq, nk, False, f"sm90 long-key tile={tile} {dtype} d={d} Nq={nq} Nk={nk}")


@sm90
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("d", [96, 128])
@pytest.mark.parametrize("nq,nk", [(4096, 4096), (4100, 4100), (129, 4097), (300, 4095)])
@pytest.mark.parametrize("grid", ["auto", "tile", "persistent", "pairs", "counter"])
def test_sm90_causal_long_tile(dtype, d, nq, nk, grid, forced, fa_overrides):
    """Causal from FA_SM90_FENCE_NK (4096) keys at d <= 128 runs the 2-consumer tile with the
    softmax fence (sm90_tile_fenced) on the plain grids, and past FA_SM90_PERSISTENT_CAUSAL_KEYS
    (auto) or forced the variant kernel on the counter walk (fa_plan_sm90_causal_counter): whole
    and partial 128-row tiles and key blocks (4100 = 32 · 128 + 4), fewer queries than keys, the
    plain tile just below the switch, GQA, lse, every grid."""
    fa_overrides(sm90_grid=grid)
    check_gqa_lse(dtype, d, nq, nk, True, f"sm90 causal long tile {dtype} d={d} Nq={nq} Nk={nk}")


@sm90
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("d,nk", [(64, 1000), (128, 2500), (128, 1500), (256, 700)])
@pytest.mark.parametrize("tail", [0, 2, 3, 4, 1], ids=["auto", "2", "3", "4", "off"])
def test_sm90_split_last_round(dtype, d, nk, tail, forced, fa_overrides):
    """The persistent grid's last, partly filled round split along the keys (sm90_tail: the rule,
    2-4 parts forced, 1 off) and merged: 8 heads of 3500 query rows are 152 tiles of 192 rows
    (d = 64, and d = 128 at 2500 keys on the three-consumer tile, forced) or 224 of 128 (d = 128 at
    1500 keys on the two-consumer tile, forced; d = 256), so a tail on 132 SMs. Only the d = 128
    three-consumer tile splits; the others take the override and run their tiles whole. Key block
    tails, GQA, lse."""
    fa_overrides(sm90_grid="persistent", sm90_tail=tail,
                 sm90_long_tile="auto" if d != 128 else "on" if nk == 2500 else "off")
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
    round (sm90_tail=1: not). GQA, lse. d = 128 on the three-consumer tile (sm90_long_tile "on")."""
    fa_overrides(sm90_tail=tail, sm90_long_tile="on")
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
    past it the 3-consumer one (192 rows on 128-key blocks, whose first warpgroups skip the blocks
    past their rows: FA_SM90_CAUSAL_SKIP): both sides of the switch, more keys than queries and
    fewer, GQA, lse, every grid."""
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
@pytest.mark.parametrize("grid", ["tile", "persistent", "pairs", "counter"],
                         ids=["one_cta_per_tile", "persistent", "pairs", "counter"])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_sm90_causal_sections(grid, d, forced, fa_overrides):
    """Causal tiles walked in sections of G heads rank by rank (sm90_heads; automatic: on one CTA
    per tile, sections of K and V within 32 MB): 30 heads (B = 3, Hq = 10 on 5 KV heads) in
    sections of 1, 2, 3, 5 (G = 4 and 7 round down to divisors of 30), all 30 and the automatic
    choice give the same bits, within the accuracy rule; a window and sinks (the variant kernel)
    the same bits in every section too. On the packed walk ("counter") a section is G of a batch
    entry's 10 heads (1, 2, 5 or 10)."""
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


# Sinks alone and ALiBi alone run on the plain tiles' SM90_SINK and SM90_ALIBI kernels (sm90.cu,
# sm90_plain_extra): (B, Hq, Hkv, Nq, Nk, d, causal) for each plain tile.
PLAIN_TILE_SHAPES = {
    "d64_short_causal": (2, 4, 2, 700, 700, 64, True),
    "d64_three_consumers": (2, 4, 2, 1500, 1500, 64, True),
    "d128": (2, 4, 2, 777, 1025, 128, True),
    "d128_causal_fenced": (1, 4, 2, 4200, 4200, 128, True),
    "d128_long_keys": (2, 4, 2, 3500, 2500, 128, False),      # 152 tiles: a last round the rule splits
    "d256": (2, 4, 2, 600, 900, 256, False),
    "d128_pairs": (1, 4, 2, 3000, 3000, 128, True),             # 24 query tiles a head: the pairs grid
    "d256_causal_mqa": (1, 4, 1, 900, 900, 256, True),
}


def plain_tile_shape(shape, fa_overrides):
    """PLAIN_TILE_SHAPES[shape], its tile forced where the key count alone would not pick it (the
    three-consumer tile for d128_long_keys: sm90_long_tile)."""
    if shape == "d128_long_keys":
        fa_overrides(sm90_long_tile="on")
    return PLAIN_TILE_SHAPES[shape]


@sm90
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", list(PLAIN_TILE_SHAPES))
@pytest.mark.parametrize("grid", ["auto", "tile", "split"])
def test_sm90_sinks_on_the_plain_tiles(dtype, shape, grid, forced, fa_overrides):
    """Sinks without other variants on each plain tile (GQA, tails, lse) against the float64
    reference: the automatic grid, one CTA per tile, and the persistent grid with its last round
    split in 3 (sm90_tail; the tile that splits: d128_long_keys), where the merge adds the sink. A
    sink of −inf adds nothing: the plain call's output bits, its lse within a float's rounding (the
    plain row end fuses m · c into m · c + log2 l)."""
    from test_variants import assert_variant_accurate
    fa_overrides(**({"sm90_grid": "persistent", "sm90_tail": 3} if grid == "split" else {"sm90_grid": grid}))
    B, Hq, Hkv, nq, nk, d, causal = plain_tile_shape(shape, fa_overrides)
    torch.manual_seed(nq + nk + d)
    q = randn(B, Hq, nq, d, dtype=dtype, device="cuda")
    k = randn(B, Hkv, nk, d, dtype=dtype, device="cuda")
    v = randn(B, Hkv, nk, d, dtype=dtype, device="cuda")
    # Sinks that weigh: near the rows' lse (about log Nk: a sink dropped or doubled moves the output
    # past the rule), above every key, and far below (randn · 3 added 0.5 % to a split row's sum).
    sinks = torch.tensor([math.log(nk) + 0.5, 30.0, -30.0, math.log(nk)], device="cuda")
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal, sinks=sinks)
    what = f"sm90 sinks {shape} {dtype} grid={grid}"
    assert_variant_accurate(out, lse, q, k, v, what=what, causal=causal, sinks=sinks)
    none = torch_flashattn.attention_lse(q, k, v, causal=causal, sinks=torch.full((Hq,), float("-inf"), device="cuda"))
    plain = torch_flashattn.attention_lse(q, k, v, causal=causal)
    assert torch.equal(none[0], plain[0]), f"{what}: −inf sinks changed the output bits"
    torch.testing.assert_close(none[1], plain[1], rtol=1e-6, atol=1e-6, msg=f"{what}: −inf sinks moved the lse")


@sm90
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", list(PLAIN_TILE_SHAPES))
@pytest.mark.parametrize("grid", ["auto", "tile", "split"])
def test_sm90_alibi_on_the_plain_tiles(dtype, shape, grid, forced, fa_overrides):
    """ALiBi without other variants on each plain tile (its term loaded into S's accumulator before
    Q Kᵀ lands on it) against the float64 reference: the paper's slopes per head, then (B, Hq) slopes
    with a scale of 0.3; zero slopes give the plain call's answer within a rounding."""
    from test_variants import alibi_heads, assert_variant_accurate
    fa_overrides(**({"sm90_grid": "persistent", "sm90_tail": 3} if grid == "split" else {"sm90_grid": grid}))
    B, Hq, Hkv, nq, nk, d, causal = plain_tile_shape(shape, fa_overrides)
    torch.manual_seed(nq + nk + d)
    q = randn(B, Hq, nq, d, dtype=dtype, device="cuda")
    k = randn(B, Hkv, nk, d, dtype=dtype, device="cuda")
    v = randn(B, Hkv, nk, d, dtype=dtype, device="cuda")
    for slopes, scale in ((alibi_heads(Hq, "cuda"), None), (torch.rand(B, Hq, device="cuda") * 0.3, 0.3)):
        out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal, scale=scale, alibi_slopes=slopes)
        what = f"sm90 ALiBi {shape} {dtype} grid={grid} slopes {tuple(slopes.shape)}"
        assert_variant_accurate(out, lse, q, k, v, what=what, causal=causal, scale=scale, alibi_slopes=slopes)
    zero = torch_flashattn.attention_lse(q, k, v, causal=causal, alibi_slopes=torch.zeros(Hq, device="cuda"))
    plain = torch_flashattn.attention_lse(q, k, v, causal=causal)
    # The ALiBi kernels rescale by exp2 of rounded log2 maxima, the plain ones by exp2 of raw maxima
    # times c: a rounding apart, so a dtype ulp apart at most.
    torch.testing.assert_close(zero[0], plain[0], rtol=2 * torch.finfo(dtype).eps, atol=2 * torch.finfo(dtype).eps,
                               msg=f"{shape} {dtype}: zero slopes against the plain call")
    torch.testing.assert_close(zero[1], plain[1], rtol=1e-5, atol=1e-5, msg=f"{shape} {dtype}: zero slopes' lse")


@sm90
@pytest.mark.parametrize("scale", [0.0, 1e-7])
def test_sm90_alibi_with_a_tiny_scale(scale, forced):
    """ALiBi with a scale below 1e-6 stays on the variant kernel (the plain kernels put its term in
    units of slope / scale): the float64 reference's answer."""
    from test_variants import alibi_heads, assert_variant_accurate
    torch.manual_seed(5)
    q = randn(2, 4, 300, 64, dtype=torch.bfloat16, device="cuda")
    k = randn(2, 2, 300, 64, dtype=torch.bfloat16, device="cuda")
    v = randn(2, 2, 300, 64, dtype=torch.bfloat16, device="cuda")
    slopes = alibi_heads(4, "cuda")
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=True, scale=scale, alibi_slopes=slopes)
    assert_variant_accurate(out, lse, q, k, v, what=f"scale {scale}", causal=True, scale=scale, alibi_slopes=slopes)


# Where the heavy keys of a row lie far from it, ALiBi's term is large where it matters: negative
# slopes (weight on the farthest keys), rows far past every key (top-left, Nq > Nk), steep slopes.
# (name, Nq, Nk, d, causal, slopes for 4 heads)
ALIBI_FAR = {
    "negative_slopes_causal": (2048, 2048, 128, True, [-0.5, -0.25, -0.05, -1.0]),
    "negative_slopes": (1500, 1500, 128, False, [-0.5, -0.25, -0.05, -1.0]),
    "rows_past_the_keys": (3000, 200, 128, False, [0.5, 0.25, 2.0, 0.05]),
    "rows_past_the_keys_d256": (3000, 200, 256, False, [0.5, 0.25, 2.0, 0.05]),
    "steep_slopes_causal": (1200, 1200, 64, True, [8.0, 4.0, 30.0, 1.0]),
}


@sm90
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", list(ALIBI_FAR))
def test_sm90_alibi_far_heavy_keys(dtype, case, forced):
    """ALiBi where a row's heavy keys are far from it, against the float64 reference (out and lse)."""
    from test_variants import assert_variant_accurate
    nq, nk, d, causal, slopes = ALIBI_FAR[case]
    torch.manual_seed(nq + nk)
    q = randn(1, 4, nq, d, dtype=dtype, device="cuda")
    k = randn(1, 2, nk, d, dtype=dtype, device="cuda")
    v = randn(1, 2, nk, d, dtype=dtype, device="cuda")
    s = torch.tensor(slopes, device="cuda")
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal, alibi_slopes=s)
    assert_variant_accurate(out, lse, q, k, v, what=f"{case} {dtype}", causal=causal, alibi_slopes=s)


@sm90
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("causal,nq", [(True, 1000), (False, 1008)])
def test_sm90_alibi_tail_key_on_a_row(dtype, d, causal, nq, forced):
    """Nk = 1000: the tail block's last key, 999 (7 mod 16), lies on the first row of a quad, whose
    block left of it then holds its reference key at distance 0, the row's heaviest, where the
    one-sided blocks' fused multiply-add must leave exactly 0 (an fma of the full slope left its
    rounding there: lse off, NaN rows at 1e20). Steep, huge and negative slopes, by the rule."""
    from test_variants import assert_variant_accurate
    torch.manual_seed(d + nq)
    q = randn(1, 5, nq, d, dtype=dtype, device="cuda")
    k = randn(1, 5, 1000, d, dtype=dtype, device="cuda")
    v = randn(1, 5, 1000, d, dtype=dtype, device="cuda")
    s = torch.tensor([0.5, 30.0, 1e3, 1e20, -8.0], device="cuda")
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal, alibi_slopes=s)
    assert_variant_accurate(out, lse, q, k, v, what=f"tail key on a row, d={d}", causal=causal, alibi_slopes=s)


@sm90
@pytest.mark.parametrize("shape", [s for s, v in PLAIN_TILE_SHAPES.items() if v[6]] + ["d256_causal"])
def test_sm90_alibi_negative_slopes_causal(shape, forced):
    """Causal calls with negative slopes, steep to huge, on every causal tile: in a diagonal block a
    negative slope's reference key is key0, the farthest key the row sees (the block's last key, the
    farthest of all, is hidden from the rows in the first half of a tile's first block; taken as the
    reference it left them NaN from −1e8, emulated)."""
    from test_variants import assert_variant_accurate
    B, Hq, Hkv, nq, nk, d, causal = PLAIN_TILE_SHAPES.get(shape, (1, 4, 2, 700, 700, 256, True))
    torch.manual_seed(nq + d)
    q = randn(B, Hq, nq, d, dtype=torch.bfloat16, device="cuda")
    k = randn(B, Hkv, nk, d, dtype=torch.bfloat16, device="cuda")
    v = randn(B, Hkv, nk, d, dtype=torch.bfloat16, device="cuda")
    s = torch.tensor([-1e30, -1e8, -0.5, -1e33], device="cuda")
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal, alibi_slopes=s)
    assert_variant_accurate(out, lse, q, k, v, what=f"negative slopes {shape}", causal=causal, alibi_slopes=s)


@sm90
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("d", [64, 128, 256])
def test_sm90_alibi_large_logits(dtype, d, forced):
    """Scores spread wide (q scaled by 8): heavy keys far from their block's reference key, where a
    slope a little off (its low bits cleared: 2^-15) put lse past the rule, emulated. The paper's
    slopes for 8 heads (one fma per score), then slopes from 0.5 to 8 (past 1: exact terms)."""
    from test_variants import alibi_heads, assert_variant_accurate
    torch.manual_seed(d)
    q = randn(1, 8, 1024, d, dtype=dtype, device="cuda") * 8
    k = randn(1, 4, 1024, d, dtype=dtype, device="cuda")
    v = randn(1, 4, 1024, d, dtype=dtype, device="cuda")
    for s in (alibi_heads(8, "cuda"), torch.tensor([0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0], device="cuda")):
        for causal in (True, False):
            out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal, alibi_slopes=s)
            assert_variant_accurate(out, lse, q, k, v, what=f"large logits d={d} causal={causal} slopes {s.tolist()}",
                                    causal=causal, alibi_slopes=s)


@sm90
@pytest.mark.parametrize("causal,nq,nk", [(True, 700, 700), (False, 900, 300)])
def test_sm90_alibi_huge_and_invalid_slopes(causal, nq, nk, forced):
    """Slopes of 1e30 and 1e35 (their terms within the scores' ±2.3e38 at every distance here, README,
    Limits) weigh every key but the row's nearest as 0, as the float64 reference does; a NaN or
    infinite slope makes its head's rows NaN (README, Limits), and leaves the other heads' rows as
    they are."""
    from test_variants import assert_variant_accurate
    torch.manual_seed(nq)
    q = randn(1, 4, nq, 64, dtype=torch.bfloat16, device="cuda")
    k = randn(1, 4, nk, 64, dtype=torch.bfloat16, device="cuda")
    v = randn(1, 4, nk, 64, dtype=torch.bfloat16, device="cuda")
    big = torch.tensor([1e30, 1e35, 0.5, 1e35], device="cuda")
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal, alibi_slopes=big)
    assert_variant_accurate(out, lse, q, k, v, what="huge slopes", causal=causal, alibi_slopes=big)
    bad = torch.tensor([float("nan"), 0.5, float("inf"), 0.25], device="cuda")
    out = torch_flashattn.attention(q, k, v, causal=causal, alibi_slopes=bad)
    assert torch.isnan(out[:, 0]).all() and torch.isnan(out[:, 2]).all(), "a NaN or inf slope's rows"
    good = torch_flashattn.attention(q, k, v, causal=causal, alibi_slopes=torch.tensor([0.1, 0.5, 0.1, 0.25], device="cuda"))
    assert torch.equal(out[:, [1, 3]], good[:, [1, 3]]), "the other heads' rows"   # heads are independent


@sm90
@pytest.mark.parametrize("shape", ["d64_short_causal", "d128_long_keys"])
@pytest.mark.parametrize("sinks", [False, True])
def test_sm90_huge_scores_never_a_silent_wrong_row(shape, sinks, forced, fa_overrides):
    """Scores of about 1e10 (scale 1e9), far past |m · c| = 2^20 in log2 units, where each exponent is
    taken relative to m · c itself (sm90_softmax): every row finite and the reference's (the heaviest
    key's v; rows whose two largest q · k lie within 1e-3, which fp32 sums may order either way, for
    finiteness only), lse within 1e-5 relative. Before, the rounding of m · c flushed or overflowed
    whole rows, and the SINK row end read l = 0 as a row that sees nothing (0, lse = the sink). The
    long-key shape splits its last round (SINK parts, lse_part)."""
    from test_variants import exact
    if shape == "d128_long_keys":
        fa_overrides(sm90_grid="persistent", sm90_tail=3)
    B, Hq, Hkv, nq, nk, d, causal = plain_tile_shape(shape, fa_overrides)
    torch.manual_seed(nq)
    q = randn(B, Hq, nq, d, dtype=torch.bfloat16, device="cuda")
    k = randn(B, Hkv, nk, d, dtype=torch.bfloat16, device="cuda")
    v = randn(B, Hkv, nk, d, dtype=torch.bfloat16, device="cuda")
    kw = {"sinks": torch.tensor([0.0, 1.0, -1.0, 2.0], device="cuda")} if sinks else {}
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal, scale=1e9, **kw)
    ref, ref_lse = exact(q, k, v, causal=causal, scale=1e9, **kw)
    out, lse = out.double().cpu(), lse.double().cpu()
    assert torch.isfinite(out).all() and torch.isfinite(lse).all(), "a row with inf or NaN"
    raw = q.double() @ k.double().repeat_interleave(Hq // Hkv, dim=1).transpose(-1, -2)
    if causal:
        raw = raw.masked_fill(torch.ones(nq, nk, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    top2 = raw.topk(2, dim=-1).values.cpu()
    clear = (top2[..., 0] - top2[..., 1] > 1e-3) | (top2[..., 1] == float("-inf"))
    assert (out[clear] - ref[clear]).abs().max().item() <= 2e-2, "a row that is not the reference's"
    assert ((lse - ref_lse).abs() <= 1e-5 * ref_lse.abs().clamp(min=1)).all(), "lse"


@sm90
@pytest.mark.parametrize("causal,nq,nk", [(True, 1000, 1000), (False, 500, 1300)])
def test_sm90_alignment_that_moves_nothing_is_plain(causal, nq, nk, forced):
    """causal_align="bottom_right" where it moves no key (δ = Nk − Nq = 0, or not causal): the plain
    kernel's bits, with and without sinks; ALiBi's distance moves with δ, so only where δ = 0."""
    torch.manual_seed(nq)
    q = randn(2, 4, nq, 128, dtype=torch.bfloat16, device="cuda")
    k = randn(2, 2, nk, 128, dtype=torch.bfloat16, device="cuda")
    v = randn(2, 2, nk, 128, dtype=torch.bfloat16, device="cuda")
    sinks = torch.randn(4, device="cuda")
    slopes = torch.rand(4, device="cuda") * 0.3
    for kw in ({}, {"sinks": sinks}) + (({"alibi_slopes": slopes},) if nq == nk else ()):
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
