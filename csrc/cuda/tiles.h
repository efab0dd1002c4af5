/*
 * tiles.h — every tile's compile-time constants, with the measurement that chose it (bench/LOG.md
 * holds the runs). sm90.cu: the Hopper forward tiles and the switches between them; decode.cu: the
 * split-KV decode tiles. The sm_80, Turing and fp32 tiles sit beside their kernels (sm80.cu,
 * sm80_backward.cu, turing.cu, fp32tc.cu, fp32.cu), one table each. Tools that build other shapes define the FA_SM90_* macros first
 * (tools/README.md).
 */
#ifndef FA_TILES_H
#define FA_TILES_H

/* ---- Hopper forward (sm90.cu) ------------------------------------------------------------------- */

/* A tile shape: D the compiled head-dim width (D/64 panels), BN keys per block, STAGES buffers
 * per K and V ring, CONSUMERS warpgroups of 64 query rows (BM = 64 · CONSUMERS) beside the
 * producer; PINGPONG: the consumers take turns to issue their wgmmas, so that one's softmax runs
 * while another's matmuls occupy the tensor cores. The kernel walks a sequence of query tiles
 * (one per CTA, or a static stride of them on a persistent grid, chosen at launch), its K/V ring
 * running on from tile to tile, so the next tile's loads start during this one's epilogue. The
 * 64K registers of the SM are split by setmaxnreg: 240 per consumer thread and 24 per producer
 * thread with 2 consumers, 160 and 32 with 3. Shared memory: (QBUFS·BM + 2·STAGES·BN) · D · 2
 * bytes. */
template <int D_, int BN_, int STAGES_, int CONSUMERS_, int PINGPONG_>
struct sm90_tile {
    static constexpr int D = D_, BN = BN_, STAGES = STAGES_, CONSUMERS = CONSUMERS_;
    static constexpr bool PINGPONG = PINGPONG_;
    static constexpr int BM = 64 * CONSUMERS_, PANELS = D_ / 64, THREADS = 128 * (CONSUMERS_ + 1);
    /* Two Q buffers where shared memory allows, so that a persistent CTA loads its next tile's Q
     * while this one is computed (one CTA per SM either way: the registers allow no more). */
    static constexpr int QBUFS = (2 * BM + 2 * STAGES_ * BN_) * D_ * 2 + 2048 <= 227 * 1024 ? 2 : 1;
    static constexpr int CONSUMER_REGS = CONSUMERS_ == 2 ? 240 : 160;
    /* softmax_done after each block's softmax: d = 256 +5 %, d = 128 even, d = 64 −3 %; the O
     * rescale skipped when no row's max moved: d = 256 +1 %, d = 128 even, d = 64 −4 % (tune.py,
     * 2026-11-30, bench/LOG.md). The fence again on 2026-12-01, with the 3-consumer d = 128 tile
     * from 2k keys: d = 128 −0.2 %, d = 64 −2 % (twice each). The rescale skipped per group of
     * 8 rows (2) rather than per warp (1), 2026-12-01, seven rounds in three calls: d = 128
     * −0.3 to +1.5 % (mean +0.6 %), 4k non-causal +0.7 to +6 % (mean +2.7 %); d = 256 +0.2 / +1.0
     * / +1.8 % but causal 4k −2 to −6 %; d = 64 (with spread tiles) −2 %
     * (bench/log/2026-12-01-sm90-spread-rescale/sm90_rescale_halves.txt). */
    static constexpr bool SOFTMAX_FENCE = D_ >= 256;
    static constexpr int RESCALE_SKIP = D_ == 128 ? 2 : D_ >= 128 ? 1 : 0;
    /* O rescaled between the next block's two issues (rescale): tune.py, bf16, 2026-12-04, two
     * rounds: the 2-consumer d = 128 tile causal +1.3 to +3.0 % (1k-16k), non-causal 1k +2.3 /
     * +2.6 %; d = 128 on 3 consumers −2.8 to +2 %, d = 64 −1 to −4 %, d = 256 −4 to +3 %. */
    static constexpr bool RESCALE_EARLY = D_ == 128 && CONSUMERS_ == 2;
    static constexpr int PRODUCER_REGS = CONSUMERS_ == 2 ? 24 : 32;
    static constexpr int MASK_STAGES = 0;   /* sm90_tile_mask: attn_mask blocks in shared memory */
    static_assert(D % 64 == 0 && BN % 16 == 0 && BN <= 256 && (CONSUMERS == 2 || CONSUMERS == 3),
                  "tile shape");
};

/* The production tiles, one per head-dim width: tools/sm90/tune.py on the H200 (bf16, B·N = 16k,
 * H·d = 2048, N 1k/4k/16k, causal and not; geomean TFLOP/s, 2026-11-30, bench/LOG.md).
 * tools/sm90/tune.py builds other shapes by defining FA_SM90_D<d>_{BN,STAGES,CONSUMERS,PINGPONG}. */
#ifndef FA_SM90_D64_BN              /* 3 consumers, ping-pong: 401; 2 cons. 359, 3 without p-p 377 */
#define FA_SM90_D64_BN 128
#define FA_SM90_D64_STAGES 2
#define FA_SM90_D64_CONSUMERS 3     /* 88 KB */
#define FA_SM90_D64_PINGPONG 1
#endif
#ifndef FA_SM90_D128_BN             /* ping-pong: 522; without 496, BN 160/176 513/514 */
#define FA_SM90_D128_BN 128
#define FA_SM90_D128_STAGES 2
#define FA_SM90_D128_CONSUMERS 2    /* 160 KB */
#define FA_SM90_D128_PINGPONG 1
#endif
#ifndef FA_SM90_D256_BN             /* BN 80, ping-pong: 568; BN 64 526, BN 64 p-p 540 */
#define FA_SM90_D256_BN 80
#define FA_SM90_D256_STAGES 2
#define FA_SM90_D256_CONSUMERS 2    /* 224 KB */
#define FA_SM90_D256_PINGPONG 1
#endif
typedef sm90_tile< 64, FA_SM90_D64_BN, FA_SM90_D64_STAGES, FA_SM90_D64_CONSUMERS, FA_SM90_D64_PINGPONG>
    sm90_tile_d64;
typedef sm90_tile<128, FA_SM90_D128_BN, FA_SM90_D128_STAGES, FA_SM90_D128_CONSUMERS, FA_SM90_D128_PINGPONG>
    sm90_tile_d128;
typedef sm90_tile<256, FA_SM90_D256_BN, FA_SM90_D256_STAGES, FA_SM90_D256_CONSUMERS, FA_SM90_D256_PINGPONG>
    sm90_tile_d256;
/* d = 128, non-causal, from FA_SM90_LONG_NK keys: three consumer warpgroups (BM = 192) on 80-key
 * blocks, 160 registers each. Below 8k keys the 2-consumer tile (its O rescaled early since
 * 2026-12-04) leads it: H100, bf16, 2-consumer / 3-consumer 2k 1.03–1.06, 4k 1.02–1.05 (fp16 1.05),
 * 16 heads of one 2k sequence 1.23, 1k queries over 6k keys 1.12; 8k 0.96–1.01, 16k 0.99–1.01
 * (2k–4k: three readings in two calls, the rest fewer; bench/LOG.md 2026-12-06-seventh). Wider
 * 2-consumer blocks at 2k–8k, one reading: BN 176 0.91–0.99x, BN 160 0.98–1.005x BN 128. */
#ifndef FA_SM90_LONG_NK
#define FA_SM90_LONG_NK 8192
#endif
#ifndef FA_SM90_D128L_BN             /* tune.py variants define both; 3 stages: within noise */
#define FA_SM90_D128L_BN 80
#define FA_SM90_D128L_STAGES 2
#endif
/* Not taken: pairs of CTAs on 384-row tiles, each loading half of every K and V block for both
 * (TMA multicast), 460-484 TFLOP/s against 598-639 at 4k-16k keys (bench/LOG.md, 2026-12-01;
 * the code is at 1307b1f). */
typedef sm90_tile<128, FA_SM90_D128L_BN, FA_SM90_D128L_STAGES, 3, 1> sm90_tile_d128_long;
/* d = 64, causal, up to FA_SM90_D64_SHORT_CAUSAL query rows (bottom-right: and keys,
 * sm90_d64_short): 2 consumers (BM = 128). tune.py, bf16, causal: 1k +13 % over the 3-consumer
 * tile, 2k −4 % (bench/LOG.md, 2026-11-30); with FA_SM90_CAUSAL_SKIP (H100, 2026-12-07-fourth):
 * 2048 here loses 6.9 % at 2k, 512 loses 7.1 % at 1k. */
#ifndef FA_SM90_D64_SHORT_CAUSAL
#define FA_SM90_D64_SHORT_CAUSAL 1024
#endif
typedef sm90_tile<64, 128, 2, 2, 1> sm90_tile_d64_short;
/* d = 128, causal, from FA_SM90_FENCE_NK keys: the 2-consumer tile with softmax_done, so that the
 * softmax of a block runs beside its own P V (without it ptxas waits for P V first). Same-call A/B
 * against the tile without it, H200, bf16, two rounds (bench/LOG.md, 2026-12-04): causal 4k
 * +0.7 %, 8k +1.7 / +1.9 %, 16k +2.6 / +2.8 %, fp16 8k +3.2 / +4.8 %; but causal 512-2k −0.6 to
 * −1.1 %, non-causal 1k −5 %, and the variant kernels −2 to +2 %: this tile alone. */
#ifndef FA_SM90_FENCE_NK
#define FA_SM90_FENCE_NK 4096
#endif
template <class C>
struct sm90_tile_fenced : C {
    static constexpr bool SOFTMAX_FENCE = true;
};
typedef sm90_tile_fenced<sm90_tile_d128> sm90_tile_d128_causal_long;
/* 1: the long causal calls' counter walk (fa_plan_sm90_causal_counter) on that fenced tile instead
 * of sm90_tile_d128 (the variant kernel there is built only then). Not yet measured: 0. */
#ifndef FA_SM90_WALK_FENCE
#define FA_SM90_WALK_FENCE 0
#endif

/* Tile C with a 2-byte float attn_mask loaded by TMA beside each K block (FA_VAR_ALL): a BM × BN
 * stage per K stage, 64-key panels of 128-byte rows in the 128-byte swizzle, so that the consumers
 * read it with ldmatrix instead of waiting on device memory for each score. One Q buffer where the
 * ring leaves no room for two (d = 128: 32 + 128 + 64 KB). */
template <class C>
struct sm90_tile_mask : C {
    static constexpr int MASK_STAGES = C::STAGES;
    static constexpr int QBUFS =
        (2 * C::BM + 2 * C::STAGES * C::BN) * C::D * 2 + C::STAGES * C::BM * C::BN * 2 + 2048 <= 227 * 1024 ? 2 : 1;
    static_assert(C::BN % 64 == 0, "the mask's 64-key panels");
};

/* The online softmax's lazy max (sm90_softmax), in log2 units; 0: off. tune.py, d = 128 with 8:
 * +4 %, but the largest P of a block is then no longer exactly 1 and the bf16 errors grow
 * 1.5-2x, past the accuracy rule on some shapes: off. */
#ifndef FA_SM90_LAZY
#define FA_SM90_LAZY 0
#endif

/* With two Q buffers, a tile's O store is waited for (the TMA done reading the shared memory it
 * is staged in, so that the producer may load a later Q there) in the next tile, once that
 * tile's first Q Kᵀ is issued, instead of at the end of the tile. tune.py, d = 128, bf16, three
 * calls: geomean +0.7 to +1.3 %, causal 2k up to +3.5 % (bench/LOG.md, 2026-12-01); 0: off. */
#ifndef FA_SM90_STORE_DEFER
#define FA_SM90_STORE_DEFER 1
#endif

/* The producer's order: 0 block j's K then its V; 1 block j's K then block j − 1's V (V lagging K
 * by a block, as the consumers take them), so that a K load waits only for its own stage and the V
 * before it, not for the V of its own block. Not yet measured: 0. */
#ifndef FA_SM90_V_LAG
#define FA_SM90_V_LAG 0
#endif
#if defined(FA_SM90_TRACE) && FA_SM90_TRACE_NO_KV && FA_SM90_V_LAG
#error "FA_SM90_TRACE_NO_KV assumes each block's K and V loaded together (FA_SM90_V_LAG 0)"
#endif

/* Causal plain calls on ping-pong tiles: a warpgroup skips the key blocks that start past its last
 * row (all masked for it), taking their turns empty: 1 right after its last P V, 2 after its
 * epilogue; 0: it computes them masked. Where BM > BN (d = 64: 192 × 128) or BM is no multiple of
 * BN (d = 256: 128 × 80), the first warpgroups of a tile have such blocks: 5 % of the d = 64 causal
 * tiles' blocks at 2k keys, 1.5 % at 8k. H100, bf16, against 0 in turn, two readings in two calls
 * (bench/LOG.md 2026-12-07-skip): d = 64 causal 2k +6.8 / +7.0 %, 4k +2.8 / +3.0 %, 8k +1.4 /
 * +1.5 %, 16k +0.9 %, fp16 4k +3.0 %; d = 256 causal 2k +1.1 / +1.4 %; d = 128 (no such blocks)
 * −0.4 / +0.4 %. 1 and 2 within 0.5 % of each other; 2 is what the whole suite ran on. */
#ifndef FA_SM90_CAUSAL_SKIP
#define FA_SM90_CAUSAL_SKIP 2
#endif
/* The same in the variant kernels (VAR), each warpgroup's blocks ending at the last key its rows see
 * (var_blocks: causal in either alignment, a window's right edge, key_mask); values as above. The
 * d = 64 3-consumer tiles (192 × 128) and the d = 256 tiles (128 × 80) have such blocks on causal
 * calls, any tile on bottom-right calls whose offset is no multiple of BN. FA_SM90_VAR_LEAD 1 (with
 * a skip): on tiles with BM > BN (d = 64 and 256), where a later warpgroup's rows start a block or
 * more after the tile's first, it also skips the blocks before the first key its rows see (a
 * window's left edge), taking their turns empty before its first block. H100, bf16, in turn, two
 * calls (bench/LOG.md 2026-12-07-fourth), skip 2 and lead 1 against neither: causal windows
 * (256, 0) at 4k d = 64 +12.8 / +12.5 %, (1024, 0) +7.8 / +7.9 % (fp16 the same), (4096, 0) at 16k
 * +2.5 / +2.5 %, d = 256 (1024, 0) +1.4 / +1.3 %; softcap d = 64 causal +2.0 / +2.1 %, non-causal
 * −1.6 / −1.5 % (the skip's cost, not explained: the block loop's SASS is the same), d = 256 causal
 * +0.5 / +0.8 %, d = 128 −0.7 to +0.1 %; bottom-right 1k over 4k d = 64 +0.5 / −0.5 %, d = 256
 * −0.8 / −0.9 %. Lead on the d = 128 2-consumer tile (whose windows mostly have no lead block):
 * −1.2 to −2.2 % on its softcap and window points, so not there. The whole suite ran with the skip
 * alone and with both on every tile; sm90.cu built alone, each of these defaults' 92 kernels has the
 * SASS of its build under one of the two. */
#ifndef FA_SM90_VAR_SKIP
#define FA_SM90_VAR_SKIP 2
#endif
#ifndef FA_SM90_VAR_LEAD
#define FA_SM90_VAR_LEAD 1
#endif

/* ---- Split-KV decode (decode.cu) ------------------------------------------------------------- */

/* D: compiled head-dim width (d padded up to it); STAGES: buffers in each warp's K and V ring;
 * MIN_CTAS: CTAs per SM the registers must allow. Shared memory: 32·D + WARPS · STAGES · 64·D bytes.
 * While a warp computes one block, STAGES − 1 more are in flight: 64·D bytes each. At d = 128 the
 * rule picks the stages by how many warps stream at once (make_plan). d = 64: 3 stages against 4,
 * same call, read flush, H200 (bench/LOG.md, 2026-11-30, bench/log/2026-11-30-decode-stages-runs/decode_sweep_d64.txt):
 * B = 1 H 32/8 4k 0.50 → 0.57 TB/s, B = 8 H 32/8 1k 0.96 → 1.10, B = 32 4k 3.49 → 3.58, B = 64
 * H 32/32 2k 4.34 → 4.38, no shape slower (2 stages lost up to 17 %). d = 256 is not yet tuned. */
template <int D_, int STAGES_, int MIN_CTAS_, int WARPS_ = 4>
struct decode_tile {
    static constexpr int D = D_, STAGES = STAGES_, MIN_CTAS = MIN_CTAS_, WARPS = WARPS_, THREADS = 32 * WARPS_;
    static_assert(D % 64 == 0 && D <= 256 && STAGES >= 2 && (WARPS == 4 || WARPS == 8), "tile shape");
};
typedef decode_tile< 64, 3, 3> decode_tile_d64;    /*  50 KB: 3 CTAs/SM on sm_90 */
typedef decode_tile<128, 3, 2> decode_tile_d128;   /* 100 KB: 2 CTAs/SM on sm_90 */
typedef decode_tile<128, 3, 1, 8> decode_tile_d128_w8;   /* 196 KB, 8 warps: 1 CTA/SM on sm_90 */
typedef decode_tile<256, 2, 1> decode_tile_d256;   /* 136 KB: fits sm_80's 163 KB */
typedef decode_tile<128, 2, 2> decode_tile_d128_s2;      /*  68 KB: 2 CTAs/SM (200 registers) */
typedef decode_tile<128, 2, 1, 8> decode_tile_d128_w8_s2;   /* 132 KB, 8 warps: 1 CTA/SM */

#endif /* FA_TILES_H */
