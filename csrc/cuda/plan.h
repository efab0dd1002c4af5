/*
 * plan.h — host planning of the CUDA backend in plain C (plan.c): the choices that depend on the
 * shapes, the device's numbers and the overrides only. No CUDA header; unit-tested in CI by
 * tests/c/test_plan.c.
 */
#ifndef FA_PLAN_H
#define FA_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "fa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Under the automatic choice, a non-causal call with fewer 128-row query tiles than the GPU has
 * SMs and at least this many keys runs the split-KV kernel of fa_forward_kvcache_cuda (no append,
 * every key valid: the same attention). The forward kernels would leave most SMs idle, each CTA
 * walking every key in one tensor-core accumulation chain; those adds truncate, and over millions
 * of keys the chain's bias outgrows bf16's rounding (README, Limits). The split-KV kernel spreads
 * the keys over the whole GPU and merges the splits in fp32. */
#define FA_SPLIT_KV_MIN_KEYS 32768

/* Under the automatic choice, calls with at most this many query rows per KV head (Nq · Hq / Hkv,
 * two of the split-KV kernel's 16-row tiles: a decoding step, a few speculative tokens) run the
 * split-KV kernel at any length, fp16 / bf16 on compute capability 8.0 and later: it reads each KV
 * head's keys once or twice for its whole group, where the forward kernels run the queries of each
 * query head in a 128-row tile of their own. H200, bf16, two calls (bench/LOG.md, 2026-12-02,
 * padded decoding step): at 4 to 32 rows per KV head 1.4-6.4x faster with key_mask, 1.5-6.0x without;
 * one row (MHA) 0.97x / 1.05x at 8 x 2k keys, 2.3x at 1 x 16k; forced at 64 rows (one shape) still
 * 1.2x / 1.4x. */
#define FA_SPLIT_KV_MAX_ROWS 32

/* 1 when dispatch.cu routes the call to the split-KV kernel, on a device with sms SMs and
 * tensor_cores nonzero at compute capability 8.0 and later: the long-key rule above, or the
 * few-rows rule for fp16 / bf16 (non-causal, or Nq = Nk, where the kernel's bottom-right diagonal is
 * the call's). fa_overrides.split_kv: 1 never; 2 every call the kernel computes alike. */
int fa_plan_split_kv(const fa_params *p, const fa_overrides *o, int sms, int tensor_cores);

/* Calls with variants (fa_forward_variants_cuda): the split-KV kernel's VAR instantiation, which
 * takes key_mask here, by the few-rows rule (FA_SPLIT_KV_MAX_ROWS; a padded batch's decoding step).
 * Only where the kernel computes the same attention: fp16 / bf16, no mask tensor, no packed
 * sequences, and its δ (Nk − Nq, the queries bottom-right) is the call's or nothing depends on δ
 * (no causal, window or ALiBi). fa_overrides.split_kv: 1 never; 2 every call it takes, whatever Nq. */
int fa_plan_decode_variants(const fa_params *p, const fa_variants *v, const fa_overrides *o);

/* A Hopper tile shape (sm90.cu's sm90_tile): D the compiled head-dim width, BN keys per block, BM
 * query rows, CONSUMERS warpgroups, PINGPONG, splits: whether its last round may split. */
typedef struct {
    int D, BN, BM, CONSUMERS, PINGPONG, splits;
} fa_sm90_shape;

/* A persistent non-causal grid's walk: n_full (tiles before the heads' last query tiles; n_tiles:
 * none moved) and the split (n_whole whole tiles, then `split` tiles in `parts` parts each). */
typedef struct {
    int64_t n_full, n_whole, split;
    int parts;
} fa_sm90_walk;

/* Causal calls whose rows see more keys than this (the call's, or its window's) run on one CTA per
 * tile (fa_plan_sm90_persistent). */
#define FA_SM90_PERSISTENT_CAUSAL_KEYS 4096

/* 1: a persistent grid (a CTA per SM walking the tiles); 0: one CTA per tile. keys: the most keys
 * one query row sees (p->Nk, or fewer under a window); snake: fa_plan_sm90_window_snake's figure
 * for a causal window (0: none). */
int fa_plan_sm90_persistent(const fa_params *p, const fa_overrides *o, int64_t keys, double snake);

/* 1: a variant call that is not packed runs on the packed kernels' walk all the same, its B batch
 * entries as B sequences of Nq and Nk rows, a CTA per SM taking the query tiles from a counter
 * (packed_find): causal windows without key_mask or attn_mask at d <= 64, and at d <= 128 where the
 * window holds more than FA_SM90_PERSISTENT_CAUSAL_KEYS keys or where the persistent snake over
 * `sms` CTAs would be uneven (the d = 128 tile's bm × bn: fa_plan_sm90_window_imbalance past
 * FA_SM90_COUNTER_IMBALANCE); fa_overrides.sm90_grid 4 ("counter") forces it on every such call
 * without key_mask or attn_mask, 1–3 keep the grids. */
#define FA_SM90_COUNTER_IMBALANCE 1.07
int fa_plan_sm90_counter(const fa_params *p, const fa_variants *v, const fa_overrides *o, int64_t sms, int64_t bm,
                         int64_t bn);

/* 1: a causal call at 64 < d <= 128 with no variant (or sinks alone) whose rows see more than
 * FA_SM90_PERSISTENT_CAUSAL_KEYS keys runs the visibility-variant kernel on the packed kernels' walk
 * (fa_plan_sm90_counter's: its batch entries as sequences, the query tiles rank by rank, heaviest
 * first, from a counter) instead of the plain kernel's pairs (to 8k keys) or one CTA per tile.
 * fa_overrides.sm90_grid 4 forces it at any length, 1-3 keep the plain kernel's grids. */
int fa_plan_sm90_causal_counter(const fa_params *p, const fa_overrides *o);

/* A causal window (visible: i + delta − left <= j <= i + delta) on the persistent snake over `grid`
 * CTAs, heads · n_q_tiles tiles of bm rows on bn-key blocks: the modelled time of its busiest CTA
 * over that of one CTA per tile, or a bound on it where the bound is at most 1 (0 where not
 * modelled: no more tiles than CTAs, more than FA_SM90_WINDOW_CTAS CTAs or FA_SM90_WINDOW_TILES
 * tiles a head, or a walk past FA_SM90_WINDOW_WALK steps). Past 1 the window runs one
 * CTA per tile. FA_SM90_TILE_START, what a tile costs there beyond the persistent grid (its CTA's
 * start, first loads and last store, in key blocks), fits the twelve windows measured on an H100
 * (bf16, each grid in turn, bench/LOG.md 2026-12-07-fifth; any value from 1.3 to 1.6 picks each
 * one's faster grid): one CTA per tile for d = 64 (1024, 0) over 4 × 4k (+4.1 %) and 8 × 2k
 * (+10.1 %), persistent for d = 64 (1024, 0) over 16k (+8.2 %), (512, 0) over 2k (+5.3 %), (256, 0)
 * over 4k (+14.5 %) and d = 128 (256–1024, 0) over 2k–16k (+8 to +22 %). */
#define FA_SM90_TILE_START 1.45
#define FA_SM90_WINDOW_CTAS 1024
#define FA_SM90_WINDOW_TILES 4096
#define FA_SM90_WINDOW_WALK (1 << 18)
double fa_plan_sm90_window_snake(int64_t heads, int64_t n_q_tiles, int64_t grid, int64_t bm, int64_t bn,
                                 int64_t nq, int64_t nk, int64_t delta, int64_t left);

/* The same walk's busiest CTA over the mean load of the grid's CTAs (the snake's imbalance, the
 * counter's walk taken as even; 0 where not modelled). */
double fa_plan_sm90_window_imbalance(int64_t heads, int64_t n_q_tiles, int64_t grid, int64_t bm, int64_t bn,
                                     int64_t nq, int64_t nk, int64_t delta, int64_t left);

/* 1: a causal call's persistent grid takes each head's tiles in pairs, its i-th heaviest with its
 * i-th lightest (sm90_args.pairs; the grid is then persistent whatever fa_plan_sm90_persistent
 * says). n_q_tiles: query tiles a head; v: the call's variants (NULL: none). */
int fa_plan_sm90_pairs(const fa_params *p, const fa_overrides *o, int64_t keys, int64_t n_q_tiles,
                       const fa_variants *v);

/* Causal calls on one CTA per tile walk their tiles in sections of heads whose K and V take at most
 * this many bytes (fa_plan_sm90_heads). */
#define FA_SM90_SECTION_BYTES (32 << 20)

/* The heads of a section of the tile order (sm90_args.div_heads): a divisor of B · Hq; 1 (head by
 * head) but for causal calls on one CTA per tile (persistent = 0) or under fa_overrides.sm90_heads. */
int64_t fa_plan_sm90_heads(const fa_params *p, const fa_overrides *o, int persistent);

/* The heads of a section of the packed walk's causal order (sm90_args.div_heads of a PACKED
 * kernel): a divisor of Hq; Hq (one section a sequence) but under fa_overrides.sm90_heads. */
int64_t fa_plan_sm90_packed_heads(const fa_params *p, const fa_overrides *o);

#ifdef __CUDACC__
#define FA_PLAN_FN __host__ __device__ __forceinline__
#else
#define FA_PLAN_FN static inline
#endif

/* Item r (0 <= r < Hq · nt) of one sequence on the packed walk (sm90_walk.cuh, packed_find): its
 * head *h and its query tile's rank *rank (causal: counted from the last tile, the heaviest).
 * Causal, the sequence's heads in sections of s (a divisor of Hq), each section's tiles rank by
 * rank: r = sec · s · nt + rank · s + (h − sec · s); else head by head: r = h · nt + rank. */
FA_PLAN_FN void fa_plan_packed_place(int r, int nt, int s, int causal, int *h, int *rank)
{
    if (causal) {
        const int sec = r / (s * nt), in = r - sec * s * nt;
        *rank = in / s;
        *h = sec * s + in - *rank * s;
    } else {
        *h = r / nt;
        *rank = r - *h * nt;
    }
}

/* Rounds (tile times) a static walk of grid CTAs takes over n1 items of cost 1, then n2 of cost
 * c2, then n3 of cost c3: what its busiest CTA gets. */
double fa_plan_walk_rounds(int64_t grid, int64_t n1, int64_t n2, double c2, int64_t n3, double c3);

/* The walk of n_tiles tiles (n_q_tiles per head) of shape C on a persistent grid; *bytes: the
 * scratch its split needs (0 without one, or with_split == 0). */
fa_sm90_walk fa_plan_sm90_walk(const fa_params *p, const fa_overrides *o, fa_sm90_shape C, int64_t n_q_tiles,
                               int64_t n_tiles, int64_t grid, int with_split, size_t *bytes);

/* Decode split counts for a grid of cps CTAs per split, wave CTAs per wave (SMs · CTAs per SM). */
int64_t fa_plan_decode_splits_by_waves(int64_t wave, int64_t cps, int64_t Nk);
int64_t fa_plan_decode_splits_d64(int64_t wave, int64_t cps, int sms, int64_t Nk);

#ifdef __cplusplus
}
#endif

#endif /* FA_PLAN_H */
