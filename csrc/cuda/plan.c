/*
 * plan.c — the CUDA backend's choices that depend on the shapes, the device's numbers and the
 * overrides only (plan.h): pure C, no CUDA header, so they are unit-tested without a GPU
 * (tests/c/test_plan.c) and asking for a call's scratch and running it agree by construction.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "plan.h"

/* ---- Long keys: the split-KV route ----------------------------------------------------------- */

int fa_plan_split_kv(const fa_params *p, const fa_overrides *o, int sms, int tensor_cores)
{
    if (o->family != FA_FAMILY_AUTO || o->split_kv == 1 || (p->causal && p->Nq != p->Nk))
        return 0;
    if (o->split_kv == 2)
        return 1;
    if (tensor_cores && p->dtype != FA_FLOAT32 && p->Nq * (p->Hq / p->Hkv) <= FA_SPLIT_KV_MAX_ROWS)
        return 1;
    if (p->causal || p->Nk < FA_SPLIT_KV_MIN_KEYS)
        return 0;
    return p->B * p->Hq * ((p->Nq + 127) / 128) < sms;
}

int fa_plan_decode_variants(const fa_params *p, const fa_variants *v, const fa_overrides *o)
{
    if (o->family != FA_FAMILY_AUTO || o->split_kv == 1 || p->dtype == FA_FLOAT32 || v->mask != NULL
        || v->cu_seqlens_q != NULL)
        return 0;
    const int same_delta = v->align == FA_ALIGN_BOTTOM_RIGHT || p->Nq == p->Nk;
    if (!same_delta && (p->causal || v->window || v->alibi_slopes != NULL))
        return 0;
    return o->split_kv == 2 || p->Nq * (p->Hq / p->Hkv) <= FA_SPLIT_KV_MAX_ROWS;
}

/* ---- Hopper: the grid and its walk ----------------------------------------------------------- */

/* The grid. A persistent one (a CTA per SM walking the tiles) saves each tile the CTA's start,
 * its first loads and its last store: on the H200 it was as fast or faster on every non-causal
 * shape (1.24x at 512 keys, d = 64; bench/LOG.md, 2026-11-30). Causal, it wins up to 4k keys when
 * it walks the tiles as a snake (a.snake; +23 % at d = 128, 512 keys, +2-6 % at 4k) and
 * loses beyond (16k keys: the snake's passes no longer pair heavy with light tiles, and the
 * rank-major walk spreads concurrent tiles over every head, whose K/V then compete for L2), so
 * longer causal runs get one CTA per tile. fa_overrides.sm90_grid forces either grid. A persistent
 * causal walk is head-major (each head's tiles together, heaviest first) with odd passes of the
 * grid backwards (a.snake), so a CTA that took a heavy tile then takes a light one; 2-5x fewer
 * heads in flight than a rank-major walk, which lost (bench/LOG.md, 2026-11-30). A causal window
 * bounds every tile's keys: the same rule on the keys a row sees (bf16, d = 128, H200, 2026-12-04:
 * a 1024-key window over 16k +6 % persistent, a 4096-key one −7 %), and only where the snake's
 * busiest CTA is modelled to take no longer than one CTA per tile would (snake:
 * fa_plan_sm90_window_snake; 0 where no window bounds the keys). */
int fa_plan_sm90_persistent(const fa_params *p, const fa_overrides *o, int64_t keys, double snake)
{
    if (o->sm90_grid != 0)
        return o->sm90_grid >= 2;
    return !p->causal || ((keys < p->Nk ? keys : p->Nk) <= FA_SM90_PERSISTENT_CAUSAL_KEYS && snake <= 1.0);
}

/* The counter. Causal windows at d <= 64 run faster on the packed walk (rank by rank over a batch
 * entry's heads, heaviest first, each CTA taking its next query tile from a counter as its current
 * one's last block goes) than on either grid of the unpacked kernel, with the same bits (H100, bf16,
 * in turn, bench/LOG.md 2026-12-07-seventh): against the window rule's library (1024, 0) over 4 × 4k
 * +11.7 % (fp16 +11.4 %), 8 × 2k +14.1 %, 1 × 16k +3.9 %; (512, 0) over 8 × 2k +10.9 %; (256, 0)
 * over 4 × 4k +7.4 %; (4096, 0) over 16k +4.2 %; (256, 0) over 16 × 1k +12.8 % against the faster
 * grid. At d = 128 it came within −1.7 to +1.8 % of the rule where that takes the persistent grid
 * (+10 % at (256, 0) over 16 × 1k, one round), and those calls stay on the grids; where the window
 * holds more keys than FA_SM90_PERSISTENT_CAUSAL_KEYS and the rule takes one CTA per tile, it gained
 * +4.0, +4.1 and +4.2 % at (4096, 0) over 16k in three calls, and as the rule, against one CTA per
 * tile: (4096, 0) over 16k +4.5 %, over 2 × 8k +5.3 %, (6144, 0) over 16k +4.6 %, (8192, 0) over
 * 16k +3.3 % (H100, bf16, in turn, bench/LOG.md 2026-12-07-seventh and -eighth), so those calls take
 * it. Shorter windows at d = 128 take it where the persistent snake is modelled uneven: its busiest
 * CTA past FA_SM90_COUNTER_IMBALANCE times the mean (fa_plan_sm90_window_imbalance, on `sms` CTAs
 * and the d = 128 tile's bm × bn). The H200, bf16, 16 heads, in turn against the snake (2026-12-07-
 * ninth): 1.076-1.194 modelled, +4.2 to +12.4 % (windows of 128-512 keys over 512-2k); 1.037-1.065,
 * −2.9 to +1.0 % (256-512 keys over 2k-16k); the H100, the rule against each grid forced (2026-12-07-
 * eleventh): at least the faster of the snake and one CTA per tile at seven points, +1.3 to +15.1 % over
 * the snake where it took the counter. The packed walk reads neither key_mask nor attn_mask. */
int fa_plan_sm90_counter(const fa_params *p, const fa_variants *v, const fa_overrides *o, int64_t sms, int64_t bm,
                         int64_t bn)
{
    if (v->cu_seqlens_q != NULL || v->key_mask != NULL || v->mask != NULL)
        return 0;
    if (o->sm90_grid != 0)
        return o->sm90_grid == 4;
    if (!p->causal || !v->window || v->window_left < 0 || v->window_left + 1 >= p->Nk)
        return 0;
    if (p->d <= 64)
        return 1;
    if (p->d > 128)
        return 0;
    if (v->window_left + 1 > FA_SM90_PERSISTENT_CAUSAL_KEYS)
        return 1;
    const int64_t n_q_tiles = (p->Nq + bm - 1) / bm, n = p->B * p->Hq * n_q_tiles;
    const int64_t delta = v->align == FA_ALIGN_BOTTOM_RIGHT ? p->Nk - p->Nq : 0;
    return fa_plan_sm90_window_imbalance(p->B * p->Hq, n_q_tiles, n < sms ? n : sms, bm, bn, p->Nq, p->Nk, delta,
                                         v->window_left) > FA_SM90_COUNTER_IMBALANCE;
}

/* Long causal calls without variants on the counter walk (plan.h): a persistent grid whose CTAs each
 * take their next tile from the counter as their current one's last block is issued, so that tiles
 * of every length end together, where the pairs walk a fixed order and one CTA per tile pays each
 * tile's start. At d = 128 that gained more than the variant kernel gives up against the plain
 * kernel's fenced tile (H100, bf16, H = 16, in turn, bench/LOG.md 2026-12-08-first): 4 × 4k even
 * (636.2 / 615.2 against 636.8 / 607.7 TFLOP/s), 2 × 8k +4.6 %, 16k +4.9 %; d = 64 (−0.7 %) and
 * d = 256 (−7.4 %) lost at 8k. */
int fa_plan_sm90_causal_counter(const fa_params *p, const fa_overrides *o)
{
    if (!p->causal || p->d <= 64 || p->d > 128)
        return 0;
    if (o->sm90_grid != 0)
        return o->sm90_grid == 4;
    return (p->Nq < p->Nk ? p->Nq : p->Nk) > FA_SM90_PERSISTENT_CAUSAL_KEYS;   /* the most keys a row sees */
}

/* A causal window's tiles on the persistent snake. A window makes a head's tiles cost alike but for
 * its first ones, whose rows see fewer keys; where the grid is near a multiple of a head's tiles,
 * every pass of the snake hands each CTA the same ranks, and the CTAs that never get a light tile
 * set the pace (d = 64, 192-row tiles, 4k keys: 22 a head on 132 SMs). Each tile costs the key
 * blocks its rows see, plus one for its start and end; each head's tiles are walked heaviest
 * first (m0 = (n_q_tiles − 1 − rank) · bm), pass i of the grid over items i · grid.., odd passes
 * backwards (cta_tile). One CTA per tile: the same costs spread evenly, each tile
 * FA_SM90_TILE_START blocks more. Where even a CTA given the heaviest tile on every pass would not
 * take longer than that (long rows: few light tiles), that bound is the answer; else the loads
 * repeat every 2 · n_q_tiles / gcd(grid, n_q_tiles) passes, so one such period and the rest are
 * walked (past FA_SM90_WINDOW_WALK steps the snake is not modelled). snake_walk returns the busiest
 * CTA's load (0: not modelled), or with bound_ok that bound where it answers; *tile_out: one CTA per
 * tile's time, *mean: a CTA's load were the tiles spread evenly over the grid. */
static double snake_walk(int64_t heads, int64_t n_q_tiles, int64_t grid, int64_t bm, int64_t bn, int64_t nq,
                         int64_t nk, int64_t delta, int64_t left, int bound_ok, double *tile_out, double *mean)
{
    double load[FA_SM90_WINDOW_CTAS], cost[FA_SM90_WINDOW_TILES];
    const int64_t n = heads * n_q_tiles;
    if (grid < 1 || grid > FA_SM90_WINDOW_CTAS || n_q_tiles < 1 || n_q_tiles > FA_SM90_WINDOW_TILES || n <= grid)
        return 0.0;
    double head = 0.0, most = 0.0;                  /* a head's tiles, rank by rank, heaviest first */
    for (int64_t r = 0; r < n_q_tiles; r++) {
        const int64_t m0 = (n_q_tiles - 1 - r) * bm, m1 = (m0 + bm < nq ? m0 + bm : nq) - 1;
        const int64_t lo = m0 + delta - left > 0 ? m0 + delta - left : 0, hi = m1 + delta < nk - 1 ? m1 + delta : nk - 1;
        cost[r] = 1.0 + (hi >= lo ? (double)(hi / bn - lo / bn + 1) : 0.0);
        head += cost[r];
        most = cost[r] > most ? cost[r] : most;
    }
    *mean = (double)heads * head / (double)grid;
    *tile_out = ((double)heads * head + FA_SM90_TILE_START * (double)n) / (double)grid;
    const double bound = (double)((n + grid - 1) / grid) * most;
    if (bound_ok && bound <= *tile_out)
        return bound;
    int64_t a = grid, b = n_q_tiles;
    while (b != 0) {
        const int64_t t = a % b;
        a = b, b = t;
    }
    const int64_t period = 2 * n_q_tiles / a, full = n / grid;
    const int64_t reps = full / period, rest = full % period;
    if ((full < period ? full + 1 : period + rest + 1) * grid > FA_SM90_WINDOW_WALK)
        return 0.0;
    for (int64_t c = 0; c < grid; c++)
        load[c] = 0.0;
    /* passes 0..period − 1 (weight reps), 0..rest − 1 and the last, partial one: a pass's ranks are
     * those of the pass a period earlier (period · grid is a multiple of n_q_tiles, period is even).
     * Within a pass the items, and so the ranks, run on by one: x = i · grid + j, CTA j (even
     * passes) or grid − 1 − j (odd). */
    for (int part = 0; part < 3; part++) {
        const int64_t from = part == 2 ? full : 0, to = part == 0 ? (reps > 0 ? period : 0) : part == 1 ? rest : full + 1;
        const double w = part == 0 ? (double)reps : 1.0;
        for (int64_t i = from; i < to; i++) {
            const int64_t x0 = i * grid, m = n - x0 < grid ? n - x0 : grid;
            int64_t r = x0 % n_q_tiles;
            for (int64_t j = 0; j < m; j++) {
                load[(i & 1) ? grid - 1 - j : j] += w * cost[r];
                r = r + 1 < n_q_tiles ? r + 1 : 0;
            }
        }
    }
    double busiest = 0.0;
    for (int64_t c = 0; c < grid; c++)
        busiest = load[c] > busiest ? load[c] : busiest;
    return busiest;
}

double fa_plan_sm90_window_snake(int64_t heads, int64_t n_q_tiles, int64_t grid, int64_t bm, int64_t bn,
                                 int64_t nq, int64_t nk, int64_t delta, int64_t left)
{
    double tile = 0.0, mean = 0.0;
    const double busiest = snake_walk(heads, n_q_tiles, grid, bm, bn, nq, nk, delta, left, 1, &tile, &mean);
    return busiest > 0.0 ? busiest / tile : 0.0;
}

double fa_plan_sm90_window_imbalance(int64_t heads, int64_t n_q_tiles, int64_t grid, int64_t bm, int64_t bn,
                                     int64_t nq, int64_t nk, int64_t delta, int64_t left)
{
    double tile = 0.0, mean = 0.0;
    const double busiest = snake_walk(heads, n_q_tiles, grid, bm, bn, nq, nk, delta, left, 0, &tile, &mean);
    return busiest > 0.0 ? busiest / mean : 0.0;
}

/* Pairs. A static walk over one head's tiles at a time, heaviest first, balances only where the
 * grid's passes pair heavy tiles with light ones: a snake whose pass is not near a whole number of
 * heads' tiles does not (B = 1, 16 heads of 8k keys at d = 128: 1024 tiles on 132 CTAs, its busiest
 * CTA modelled at 1.53x the mean, −23 % against one CTA per tile, bench/LOG.md 2026-12-04). Pairs of
 * a head's i-th heaviest and i-th lightest tile cost the same (n_q_tiles + 1 key blocks for an even
 * number of tiles), so a grid walking pairs is balanced within a pair wherever it is. In turn with
 * the other grids (H100, bf16, d = 128, medians of five rounds, bench/LOG.md 2026-12-05): 4k keys
 * +1.8 % over the snake, 8k +2.6 % (B = 2) and +2.2 % (B = 1) over one CTA per tile, 2k −0.3 %, 16k
 * even; d = 64 −1.5 / −1.9 % (4k / 16k), d = 256 −1.1 to +2.7 %: the d = 128 tiles of plain calls
 * from 2049 to 8192 keys, with an even number of query tiles a head. The variants that leave each
 * tile's keys as causal makes them (softcap, ALiBi, sinks with them, either alignment; sinks alone run
 * on the plain kernels, v NULL here; H100, two calls of three
 * rounds, 2026-12-05-variant-pairs): 8k keys −2.0 to +6.4 % over one CTA per tile, +2.4 % on average
 * over ten readings (eight gains), 4k −0.1 to −4.7 % against the snake: from 4097 keys. A window,
 * key_mask or attn_mask makes the tiles' costs other than a triangle's (and key_mask makes each CTA
 * of a pair scan every batch entry's key range): never paired automatically. */
int fa_plan_sm90_pairs(const fa_params *p, const fa_overrides *o, int64_t keys, int64_t n_q_tiles,
                       const fa_variants *v)
{
    if (o->sm90_grid != 0)
        return o->sm90_grid == 3 && p->causal;
    const int64_t seen = keys < p->Nk ? keys : p->Nk;
    const int triangles = v == NULL
                       || (!v->window && v->key_mask == NULL && v->mask == NULL && v->cu_seqlens_q == NULL);
    const int64_t from = v == NULL || !fa_has_variants(v) ? 2048 : 4096;
    return p->causal && triangles && p->d > 64 && p->d <= 128 && n_q_tiles % 2 == 0 && seen > from && seen <= 8192;
}

/* The tile order's sections. One CTA per tile, the hardware starts the CTAs in order as SMs come
 * free. Head by head, causal, each head's heaviest tile starts only once the heads before it are
 * out, and the last heads' heaviest tiles run on while most SMs have nothing left. A section of
 * heads walked rank by rank, heaviest first, starts the heavy tiles of all its heads together and
 * ends on light ones; sections of K and V within FA_SM90_SECTION_BYTES (32 MB) keep what a section
 * reads in L2. H200, FlashAttention's grid, in turn against head by head: 8k keys +4.0 % (d = 64),
 * +4.1 % (d = 128), +9.0 % (d = 256) in bf16, the same in fp16; 16k keys +3 % at d = 64, even at
 * d = 128 and 256; larger sections lose at d = 256 (all 16 heads of 8k keys, 128 MB: −2 % against
 * 2 heads). On the persistent grid's snake sections lost (4 heads: −0.1 to −37 %). bench/LOG.md,
 * 2026-12-04-sections. */
int64_t fa_plan_sm90_heads(const fa_params *p, const fa_overrides *o, int persistent)
{
    const int64_t bh = p->B * p->Hq;
    int64_t g = 1;
    if (o->sm90_heads > 0) {
        g = o->sm90_heads;
    } else if (!persistent) {                       /* K and V of one query head: shared by its group */
        const double head = 2.0 * 2.0 * (double)p->Nk * (double)p->d / (double)(p->Hq / p->Hkv);
        g = (int64_t)((double)FA_SM90_SECTION_BYTES / head);
    }
    if (!p->causal || g < 1)
        g = 1;
    for (g = g < bh ? g : bh; g > 1 && bh % g != 0; g--)
        ;
    return g;
}

/* The packed walk's sections (packed_find): a causal sequence's tiles in sections of n of its Hq
 * query heads, rank by rank within a section, heaviest first. All Hq heads in one section unless
 * fa_overrides.sm90_heads forces n (the largest divisor of Hq up to n). */
int64_t fa_plan_sm90_packed_heads(const fa_params *p, const fa_overrides *o)
{
    int64_t g = o->sm90_heads > 0 && o->sm90_heads < p->Hq ? o->sm90_heads : p->Hq;
    while (g > 1 && p->Hq % g != 0)
        g--;
    return g;
}

/* Items CTA c of a static walk over `grid` CTAs (items c, c + grid, ...) takes below item x. */
static int64_t walk_items_below(int64_t c, int64_t grid, int64_t x)
{
    return x > c ? (x - c + grid - 1) / grid : 0;
}

/* Rounds (tile times) a static walk takes over n1 items of cost 1, then n2 of cost c2, then n3 of
 * cost c3: what its busiest CTA gets. CTA c has x / grid of the items below x, and one more if
 * c < x % grid, so its load is constant between the three remainders: CTA 0 and the CTAs at the
 * remainders cover every case. */
double fa_plan_walk_rounds(int64_t grid, int64_t n1, int64_t n2, double c2, int64_t n3, double c3)
{
    const int64_t cand[4] = {0, n1 % grid, (n1 + n2) % grid, (n1 + n2 + n3) % grid};
    double worst = 0.0;
    for (int i = 0; i < 4; i++) {
        const int64_t c = cand[i];
        const int64_t a = walk_items_below(c, grid, n1), b = walk_items_below(c, grid, n1 + n2),
                      e = walk_items_below(c, grid, n1 + n2 + n3);
        const double r = (double)a + (double)(b - a) * c2 + (double)(e - b) * c3;
        worst = r > worst ? r : worst;
    }
    return worst;
}

/* The walk of a persistent non-causal grid: n_tiles tiles on grid CTAs, CTA c taking the tiles
 * c, c + grid, ... of the sequence, so that with n_tiles = R · grid + t it takes R + 1 rounds.
 * Two remedies, chosen by the rounds they model:
 *   - When a head's last query tile has rows for fewer warpgroups than the tile has (Nq mod BM in
 *     1..BM − 64), the others compute nothing (ping-pong tiles). With b busy warpgroups such a
 *     tile costs about (b + 1) / CONSUMERS of a whole one: one busy of three took 0.64 of a whole
 *     tile's time at d = 128, 4k keys, and 0.71 at d = 64, 1k keys (tools/sm90/trace.py, H200,
 *     2026-12-01). If that saves rounds, those tiles go to the end of the walk, where they fill
 *     what the whole tiles leave of the last round. FlashAttention's grid at d = 64 and 1k keys:
 *     3072 tiles of 192 rows, 512 of them with one busy warpgroup: 22.7 modeled rounds, not 24.
 *   - The last round's t tiles split along their keys into s parts (s ≤ 4, each at least 2 key
 *     blocks), which take ceil(t · s / grid) / s of a round, plus about 7 / Nk of a round per part
 *     for its scratch round trip and merge (H200, d = 128, bench/LOG.md,
 *     bench/log/2026-11-30-sm90-quant/sm90_quant.txt: 16k and 8k keys in 2 parts and 4k with 44 tiles in 3 parts
 *     gain, 88 tiles in 3 parts lose 1.2 % where the rounds alone say +3 %). Only the d = 128
 *     three-consumer tile (at d = 64, 44 tiles in 3 parts lost 2.3 %), only with the scratch
 *     (with_split), and only if it saves a tenth of a round. With the last query tiles moved, the
 *     split tiles are the last whole ones before them.
 * fa_overrides.sm90_tail = 1 splits nothing; 2, 3 or 4 forces that many parts wherever there is
 * a tail (C.splits tiles only). Returns the walk; *bytes: the scratch its split needs. */
fa_sm90_walk fa_plan_sm90_walk(const fa_params *p, const fa_overrides *o, fa_sm90_shape C, int64_t n_q_tiles,
                               int64_t n_tiles, int64_t grid, int with_split, size_t *bytes)
{
    fa_sm90_walk w = {n_tiles, n_tiles, 0, 1};
    *bytes = 0;
    if (p->causal || n_tiles < grid)
        return w;
    const int rem = (int)(p->Nq % C.BM), busy = (rem + 63) / 64;
    const int64_t moved = rem != 0 && busy < C.CONSUMERS && C.PINGPONG ? n_tiles / n_q_tiles : 0;
    const int64_t n_full = n_tiles - moved;
    const double light = fmin(1.0, (double)(busy + 1) / C.CONSUMERS);
    double best = fa_plan_walk_rounds(grid, n_tiles, 0, 0.0, 0, 0.0);
    if (moved > 0) {
        const double r = fa_plan_walk_rounds(grid, n_full, 0, 0.0, moved, light);
        if (r < best - 0.05) {
            best = r;
            w.n_full = w.n_whole = n_full;
        }
    }

    const int forced = o->sm90_tail >= 2 ? o->sm90_tail : 0;
    const int n_blocks = (int)((p->Nk + C.BN - 1) / C.BN);
    if (!with_split || o->sm90_tail == 1 || !C.splits)
        return w;
    const double whole = best;
    for (int s = forced ? forced : 2; s <= (forced ? forced : 4) && n_blocks >= 2 * s; s++)
        for (int m = 0; m < 2; m++) {                   /* m: the last query tiles moved or not */
            if (m == 1 && moved == 0)
                continue;
            const int64_t full = m ? n_full : n_tiles, t = full % grid;
            if (t == 0 || full < grid)
                continue;
            const double r = fa_plan_walk_rounds(grid, full - t, t * s, 1.0 / s, m ? moved : 0, light)
                           + (double)(t * s) * 7.0 / (double)p->Nk;
            if (forced ? m == (moved > 0) : r <= whole - 0.1 && r < best) {
                best = r;
                w.n_full = full;
                w.n_whole = full - t;
                w.split = t;
                w.parts = s;
            }
        }
    if (w.parts > 1)
        *bytes = (size_t)(w.split * w.parts * C.BM) * (size_t)(p->d + 1) * sizeof(float);
    return w;
}

/* ---- Decode: the split count --------------------------------------------------------------- */

/* The split count by waves (d > 64, and the CUDA-core kernel): every CTA of a split does the
 * same work, so a grid of 2.1 waves takes as long as 3. Wave efficiency e(s) = CTAs / (waves
 * rounded up · wave); among split counts up to one per 128 keys of Nmax and up to four waves,
 * the fewest (least to combine) within 5% of the best. */
int64_t fa_plan_decode_splits_by_waves(int64_t wave, int64_t cps, int64_t Nk)
{
    int64_t max_splits = (Nk + 127) / 128;
    max_splits = max_splits < (4 * wave + cps - 1) / cps ? max_splits : (4 * wave + cps - 1) / cps;
    double best = 0.;
    for (int64_t sp = 1; sp <= max_splits; sp++) {
        const int64_t ctas = sp * cps;
        const double e = (double)ctas / (double)(((ctas + wave - 1) / wave) * wave);
        best = e > best ? e : best;
    }
    int64_t splits = 1;
    while (splits < max_splits) {
        const int64_t ctas = splits * cps;
        if ((double)ctas / (double)(((ctas + wave - 1) / wave) * wave) >= 0.95 * best)
            break;
        splits++;
    }
    return splits;
}

/* The split count at d <= 64 on tensor cores: a warp's stage holds half the bytes of d = 128's,
 * so the grid needs more CTAs for the bytes in flight the DRAM wants than the wave rule gives
 * it. The fewest splits that put two CTAs on 15/16 of the SMs (one when a split alone has that
 * many), within one wave, each reading at least 256 keys. Read flush, H200, against cuDNN in the same call
 * (bench/LOG.md, 2026-12-01, bench/log/2026-12-01-decode-d64-splits/decode_sweep_d64_splits.txt), the wave rule's
 * choice, then this one's: B = 32 H 32/8 4k 0.88× (3 splits) → 0.97× (1),
 * B = 1 H 32/32 32k 0.88× (4) → 0.96× (8), B = 8 H 32/8 4k 1.02× (2) → 1.09×
 * (4), B = 1 H 32/8 4k 0.85× (22) → 0.88× (16); B = 8 H 32/8 32k 0.97× (6) → 0.95× (4);
 * the other shapes within 1 %.
 * Where one split is more than a wave of CTAs: two splits if one would fill its waves less
 * than 70 % (CTAs / (waves rounded up · wave)), else one. Read flush, H200, forced counts
 * 1 / 2 / 3 / 4 in TB/s (bench/LOG.md, 2026-12-01, bench/log/2026-12-01-decode-d64-splits/decode_sweep_d64_waves.txt), by how full
 * one split's waves are: 57 % (B = 56 H 32/8 2k) 3.09 / 3.30 / 3.21 / 3.15, 65 % (B = 16
 * H 32/32 4k) 3.71 / 4.03 / 4.04 / 3.73, 65 % (B = 64 H 32/8 4k) 3.70 / 3.99 / 3.92 / 3.67;
 * 75 % (B = 28 H 32/32 2k) 3.88 / 3.82 / 3.71 / 3.45, 81 % (B = 20 H 32/32 4k) 4.18 / 3.89 /
 * 4.12 / 3.82, 86 % (B = 32 H 32/32 4k) 4.33 / 4.20 / 4.27 / 4.25. */
int64_t fa_plan_decode_splits_d64(int64_t wave, int64_t cps, int sms, int64_t Nk)
{
    const int64_t want = 2 * (int64_t)(sms - sms / 16), most = (Nk + 255) / 256;
    int64_t splits;
    if (cps <= wave) {
        splits = (want + cps - 1) / cps;
        splits = splits * cps > wave ? wave / cps : splits;
    } else {
        splits = 100 * cps < 70 * ((cps + wave - 1) / wave) * wave ? 2 : 1;
    }
    splits = splits < most ? splits : most;
    return splits > 1 ? splits : 1;
}

