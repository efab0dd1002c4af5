/*
 * test_plan.c — unit tests of the CUDA backend's host planning (csrc/cuda/plan.c), no GPU needed.
 * Built and run by tests/test_c_api.py:
 *
 *     gcc -std=c11 -Icsrc -Icsrc/cuda tests/c/test_plan.c csrc/cuda/plan.c csrc/fa_common.c -lm
 *
 * Checks the walk model against a brute-force walk, the Hopper grid and walk choices on shapes the
 * H200 measurements chose them for (bench/LOG.md), the decode split rules against the counts the
 * decode tests document for an H200 (132 SMs, 3 CTAs per SM of the d = 64 tile), and the
 * overrides. Prints one "ok" or "FAIL" line per check; exits 1 on a failure.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fa.h"
#include "plan.h"

static int failures, checks;

static void check(int cond, const char *what)
{
    checks++;
    failures += !cond;
    printf("%s %s\n", cond ? "ok  " : "FAIL", what);
}

/* The busiest CTA's load of a static walk, item by item. */
static double brute_rounds(int64_t grid, int64_t n1, int64_t n2, double c2, int64_t n3, double c3)
{
    double worst = 0.0;
    for (int64_t c = 0; c < grid; c++) {
        double load = 0.0;
        for (int64_t x = c; x < n1 + n2 + n3; x += grid)
            load += x < n1 ? 1.0 : x < n1 + n2 ? c2 : c3;
        worst = load > worst ? load : worst;
    }
    return worst;
}

static fa_params shape(int64_t B, int64_t H, int64_t Nq, int64_t Nk, int64_t d, int causal)
{
    fa_params p;
    memset(&p, 0, sizeof p);
    p.B = B; p.Hq = H; p.Hkv = H; p.Nq = Nq; p.Nk = Nk; p.d = d; p.causal = causal;
    p.dtype = FA_BFLOAT16;
    p.scale = 1.0f;
    return p;
}

static void test_walk_rounds(void)
{
    int same = 1;
    unsigned seed = 1;
    for (int t = 0; t < 2000; t++) {
        seed = seed * 1103515245u + 12345u;
        const int64_t grid = 1 + seed % 17, n1 = (seed >> 5) % 60, n2 = (seed >> 11) % 40, n3 = (seed >> 17) % 30;
        const double c2 = 0.25 * (1 + (seed >> 23) % 4), c3 = 0.5;
        same &= fabs(fa_plan_walk_rounds(grid, n1, n2, c2, n3, c3) - brute_rounds(grid, n1, n2, c2, n3, c3)) < 1e-9;
    }
    check(same, "walk_rounds equals a brute-force walk on 2000 random walks");
}

static void test_sm90_grid(void)
{
    fa_overrides o;
    memset(&o, 0, sizeof o);
    fa_params p = shape(4, 16, 4096, 4096, 128, 0);
    check(fa_plan_sm90_persistent(&p, &o, p.Nk, 0.0) == 1, "sm90: non-causal runs a persistent grid");
    p = shape(4, 16, 4096, 4096, 128, 1);
    check(fa_plan_sm90_persistent(&p, &o, p.Nk, 0.0) == 1, "sm90: causal up to 4k keys runs a persistent grid");
    p = shape(2, 16, 8192, 8192, 128, 1);
    check(fa_plan_sm90_persistent(&p, &o, p.Nk, 0.0) == 0, "sm90: causal past 4k keys runs one CTA per tile");
    check(fa_plan_sm90_persistent(&p, &o, 1025, 0.0) == 1, "sm90: causal with a 1024-key window runs a persistent grid");
    check(fa_plan_sm90_persistent(&p, &o, 4097, 0.0) == 0, "sm90: causal with a 4096-key window runs one CTA per tile");
    o.sm90_grid = 2;
    check(fa_plan_sm90_persistent(&p, &o, p.Nk, 0.0) == 1, "sm90: sm90_grid = 2 forces the persistent grid");
    o.sm90_grid = 3;
    check(fa_plan_sm90_persistent(&p, &o, p.Nk, 0.0) == 1, "sm90: sm90_grid = 3 (pairs) is a persistent grid");
    check(fa_plan_sm90_pairs(&p, &o, p.Nk, 64, NULL) == 1, "sm90: sm90_grid = 3 walks causal tiles in pairs");
    o.sm90_grid = 0;
    check(fa_plan_sm90_pairs(&p, &o, p.Nk, 64, NULL) == 1, "sm90: d = 128 causal at 8k keys walks its tiles in pairs");
    check(fa_plan_sm90_causal_counter(&p, &o) == 1, "sm90: d = 128 causal at 8k keys runs on the counter walk");
    p.Nk = p.Nq = 4096;
    check(fa_plan_sm90_causal_counter(&p, &o) == 0, "sm90: d = 128 causal at 4k keys keeps the plain kernel");
    o.sm90_grid = 4;
    check(fa_plan_sm90_causal_counter(&p, &o) == 1, "sm90: sm90_grid = 4 forces the counter walk at d = 128 causal");
    o.sm90_grid = 1;
    p.Nk = p.Nq = 16384;
    check(fa_plan_sm90_causal_counter(&p, &o) == 0, "sm90: sm90_grid = 1 keeps one CTA per tile");
    o.sm90_grid = 0;
    p.Nq = 4096;
    check(fa_plan_sm90_causal_counter(&p, &o) == 0, "sm90: 4096 top-left queries over 16k keys stay plain");
    p.Nq = 16384;
    p.d = 64;
    check(fa_plan_sm90_causal_counter(&p, &o) == 0, "sm90: d = 64 causal keeps the plain kernel");
    p.d = 128;
    p.causal = 0;
    check(fa_plan_sm90_causal_counter(&p, &o) == 0, "sm90: non-causal keeps the plain kernel");
    p = shape(2, 16, 8192, 8192, 128, 1);
    check(fa_plan_sm90_pairs(&p, &o, p.Nk, 63, NULL) == 0, "sm90: no pairs with an odd number of query tiles");
    fa_variants v;
    memset(&v, 0, sizeof v);
    check(fa_plan_sm90_pairs(&p, &o, p.Nk, 64, &v) == 1, "sm90: no variant set walks pairs as a plain call");
    v.softcap = 30.f;
    check(fa_plan_sm90_pairs(&p, &o, p.Nk, 64, &v) == 1, "sm90: a softcap at 8k keys walks its tiles in pairs");
    v.softcap = 0.f;
    v.align = FA_ALIGN_BOTTOM_RIGHT;
    check(fa_plan_sm90_pairs(&p, &o, p.Nk, 64, &v) == 1, "sm90: bottom-right causal at 8k keys walks pairs");
    check(fa_plan_sm90_pairs(&p, &o, 4096, 32, &v) == 0, "sm90: no pairs for variants at 4k keys");
    v.window = 1, v.window_left = 6000, v.window_right = 0;
    check(fa_plan_sm90_pairs(&p, &o, 6001, 64, &v) == 0, "sm90: no automatic pairs with a window");
    v.window = 0;
    v.key_mask = (const uint8_t *)&v;
    check(fa_plan_sm90_pairs(&p, &o, p.Nk, 64, &v) == 0, "sm90: no automatic pairs with key_mask");
    v.key_mask = NULL;
    v.mask = &v;
    check(fa_plan_sm90_pairs(&p, &o, p.Nk, 64, &v) == 0, "sm90: no automatic pairs with attn_mask");
    check(fa_plan_sm90_pairs(&p, &o, 2048, 64, NULL) == 0, "sm90: no pairs at 2048 keys seen");
    p = shape(1, 16, 16384, 16384, 128, 1);
    check(fa_plan_sm90_pairs(&p, &o, p.Nk, 128, NULL) == 0, "sm90: no pairs past 8k keys");
    p = shape(2, 32, 8192, 8192, 64, 1);
    check(fa_plan_sm90_pairs(&p, &o, p.Nk, 64, NULL) == 0, "sm90: no pairs at d = 64");
    p = shape(2, 16, 8192, 8192, 128, 0);
    check(fa_plan_sm90_pairs(&p, &o, p.Nk, 64, NULL) == 0, "sm90: no pairs without causal");
    o.sm90_grid = 1;
    p = shape(4, 16, 4096, 4096, 128, 0);
    check(fa_plan_sm90_persistent(&p, &o, p.Nk, 0.0) == 0, "sm90: sm90_grid = 1 forces one CTA per tile");
}

/* Which unpacked variant calls run on the packed walk, their tiles from a counter. */
static void test_sm90_counter(void)
{
    fa_overrides o;
    memset(&o, 0, sizeof o);
    fa_variants v;
    memset(&v, 0, sizeof v);
    fa_params p = shape(4, 32, 4096, 4096, 64, 1);
    v.window = 1, v.window_left = 1024, v.window_right = -1;
    check(fa_plan_sm90_counter(&p, &v, &o, 132, 128, 128) == 1, "counter: a d = 64 causal window");
    v.align = FA_ALIGN_BOTTOM_RIGHT, v.softcap = 30.f;
    check(fa_plan_sm90_counter(&p, &v, &o, 132, 128, 128) == 1, "counter: a d = 64 bottom-right causal window with a softcap");
    v.align = FA_ALIGN_TOP_LEFT, v.softcap = 0.f;
    v.window_left = 4095;
    check(fa_plan_sm90_counter(&p, &v, &o, 132, 128, 128) == 0, "counter: not a window that bounds no row's keys");
    v.window_left = 1024;
    p.causal = 0;
    check(fa_plan_sm90_counter(&p, &v, &o, 132, 128, 128) == 0, "counter: not a window without causal");
    p = shape(4, 16, 4096, 4096, 128, 1);
    check(fa_plan_sm90_counter(&p, &v, &o, 132, 128, 128) == 0, "counter: not at d = 128 on a window of 1025 keys");
    p = shape(2, 16, 8192, 8192, 128, 1);
    v.window_left = 2047;
    check(fa_plan_sm90_counter(&p, &v, &o, 132, 128, 128) == 0, "counter: not at d = 128 on a window the persistent grid takes");
    p = shape(1, 16, 16384, 16384, 128, 1);
    v.window_left = FA_SM90_PERSISTENT_CAUSAL_KEYS - 1;
    check(fa_plan_sm90_counter(&p, &v, &o, 132, 128, 128) == 1, "counter: d = 128 on a window of 4096 keys over 16k (uneven)");
    v.window_left = FA_SM90_PERSISTENT_CAUSAL_KEYS;
    check(fa_plan_sm90_counter(&p, &v, &o, 132, 128, 128) == 1, "counter: d = 128 on a window of more keys than that");
    p.d = 256;
    check(fa_plan_sm90_counter(&p, &v, &o, 132, 128, 128) == 0, "counter: not at d = 256");
    /* bench/LOG.md 2026-12-07-ninth (H200, 16 heads, against the snake): (256, 0) over 16 × 1k +8.9 %,
     * (128, 0) over 32 × 512 +9.2 %, (512, 0) over 16 × 1k +12.4 %; (256, 0) over 4 × 4k −1.6 %, over
     * 1 × 16k −2.9 %, (128, 0) over 8 × 2k +1.0 % (modelled 1.053: the snake kept) */
    static const struct {
        int64_t B, N, left;
        int want;
    } d128[] = {{16, 1024, 256, 1}, {32, 512, 128, 1}, {16, 1024, 512, 1}, {4, 4096, 256, 0},
                {1, 16384, 256, 0}, {8, 2048, 128, 0}};
    for (size_t i = 0; i < sizeof d128 / sizeof d128[0]; i++) {
        p = shape(d128[i].B, 16, d128[i].N, d128[i].N, 128, 1);
        v.window_left = d128[i].left;
        check(fa_plan_sm90_counter(&p, &v, &o, 132, 128, 128) == d128[i].want,
              d128[i].want ? "counter: d = 128 on a short window the snake leaves uneven"
                           : "counter: not at d = 128 on a short window the snake balances");
    }
    p = shape(16, 16, 1024, 1024, 128, 1);
    v.window_left = 256;
    check(fa_plan_sm90_counter(&p, &v, &o, 4096, 128, 128) == 0, "counter: not where every tile has its own CTA");
    v.window_left = 1024;
    p = shape(4, 32, 4096, 4096, 64, 1);
    v.key_mask = (const uint8_t *)&v;
    check(fa_plan_sm90_counter(&p, &v, &o, 132, 128, 128) == 0, "counter: not with key_mask");
    v.key_mask = NULL;
    v.mask = &v;
    check(fa_plan_sm90_counter(&p, &v, &o, 132, 128, 128) == 0, "counter: not with attn_mask");
    v.mask = NULL;
    o.sm90_grid = 1;
    check(fa_plan_sm90_counter(&p, &v, &o, 132, 128, 128) == 0, "counter: sm90_grid = 1 keeps the grids");
    o.sm90_grid = 4;
    p = shape(2, 16, 1000, 1000, 128, 0);
    v.window = 0;
    check(fa_plan_sm90_counter(&p, &v, &o, 132, 128, 128) == 1, "counter: sm90_grid = 4 forces it (d = 128, no window)");
    v.cu_seqlens_q = (const int32_t *)&v;
    check(fa_plan_sm90_counter(&p, &v, &o, 132, 128, 128) == 0, "counter: packed calls are packed already");
}

/* The snake's busiest CTA for a causal window, pass by pass (cta_tile's walk), over one CTA per
 * tile's time (over_mean 0) or over the mean load (1). */
static double brute_snake(int64_t heads, int64_t nqt, int64_t grid, int64_t bm, int64_t bn, int64_t nq,
                          int64_t nk, int64_t delta, int64_t left, int over_mean)
{
    double load[64] = {0}, most = 0.0, sum = 0.0;
    for (int64_t x = 0; x < heads * nqt; x++) {
        const int64_t i = x / grid, j = x % grid, c = (i & 1) ? grid - 1 - j : j;
        const int64_t m0 = (nqt - 1 - x % nqt) * bm, m1 = (m0 + bm < nq ? m0 + bm : nq) - 1;
        int64_t lo = m0 + delta - left, hi = m1 + delta;
        lo = lo > 0 ? lo : 0;
        hi = hi < nk - 1 ? hi : nk - 1;
        load[c] += 1.0 + (hi >= lo ? (double)(hi / bn - lo / bn + 1) : 0.0);
    }
    for (int64_t c = 0; c < grid; c++) {
        most = load[c] > most ? load[c] : most;
        sum += load[c];
    }
    return most / ((sum + (over_mean ? 0.0 : FA_SM90_TILE_START * (double)(heads * nqt))) / (double)grid);
}

static void test_sm90_window_snake(void)
{
    int same = 1, same_imb = 1, bounded = 0;
    unsigned seed = 7;
    for (int t = 0; t < 2000; t++) {
        seed = seed * 1103515245u + 12345u;
        const int64_t grid = 2 + seed % 40, nqt = 1 + (seed >> 6) % 30, heads = 1 + (seed >> 11) % 50;
        const int64_t bm = 64 * (1 + (seed >> 17) % 3), bn = (seed >> 19) % 2 ? 128 : 80;
        const int64_t nq = nqt * bm - (int64_t)((seed >> 20) % 64), nk = nq + (int64_t)((seed >> 26) % 3) * 100;
        const int64_t left = 50 + (int64_t)((seed >> 8) % 1500), delta = (seed >> 28) % 2 ? nk - nq : 0;
        if (heads * nqt <= grid)
            continue;
        const double got = fa_plan_sm90_window_snake(heads, nqt, grid, bm, bn, nq, nk, delta, left);
        const double want = brute_snake(heads, nqt, grid, bm, bn, nq, nk, delta, left, 0);
        const double imb = fa_plan_sm90_window_imbalance(heads, nqt, grid, bm, bn, nq, nk, delta, left);
        same_imb &= fabs(imb - brute_snake(heads, nqt, grid, bm, bn, nq, nk, delta, left, 1)) <= 1e-9 * imb;
        bounded += got != want && got <= 1.0;
        same &= fabs(got - want) <= 1e-9 * want || (got >= want - 1e-9 && got <= 1.0);
    }
    check(same, "window_snake equals a pass-by-pass walk on 2000 random windows (or bounds it, at most 1)");
    check(same_imb, "window_imbalance equals a pass-by-pass walk's busiest CTA over the mean on 2000 random windows");
    check(bounded > 0 && bounded < 1000, "window_snake: both the bound and the walk answer some of them");
    /* bench/LOG.md 2026-12-07-fifth, 132 SMs, each grid in turn: d = 64 (192 × 128 tiles), a
     * 1024-key window over 4 × 4k keys (32 heads: 22 tiles a head) one CTA per tile +4.1 %, over 8 × 2k
     * +10.1 %; persistent: d = 64 over 16k +8.2 %, a 512-key window over 8 × 2k +5.3 %, d = 128
     * (128 × 128, 16 heads) over 4k +12.3 % */
    fa_overrides o;
    memset(&o, 0, sizeof o);
    fa_params p = shape(4, 32, 4096, 4096, 64, 1);
    const double d64 = fa_plan_sm90_window_snake(128, 22, 132, 192, 128, 4096, 4096, 0, 1024);
    const double d64_2k = fa_plan_sm90_window_snake(256, 11, 132, 192, 128, 2048, 2048, 0, 1024);
    const double d64_16k = fa_plan_sm90_window_snake(32, 86, 132, 192, 128, 16384, 16384, 0, 1024);
    const double d64_512 = fa_plan_sm90_window_snake(256, 11, 132, 192, 128, 2048, 2048, 0, 512);
    const double d128 = fa_plan_sm90_window_snake(64, 32, 132, 128, 128, 4096, 4096, 0, 1024);
    check(d64 > 1.0 && d64_2k > 1.0, "window_snake: d = 64, 1024 keys over 4k and 2k: one CTA per tile is faster");
    check(d64_16k < 1.0 && d64_512 < 1.0 && d128 < 1.0, "window_snake: d = 64 over 16k, 512 keys over 2k, d = 128: the snake");
    check(fa_plan_sm90_persistent(&p, &o, 1025, d64) == 0, "sm90: a 1024-key window over 4k at d = 64: one CTA per tile");
    check(fa_plan_sm90_persistent(&p, &o, 1025, d128) == 1, "sm90: a 1024-key window the snake balances: persistent");
    check(fa_plan_sm90_window_snake(1, 22, 132, 192, 128, 4096, 4096, 0, 1024) == 0.0,
          "window_snake: no more tiles than CTAs is not modelled");
    o.sm90_grid = 2;
    check(fa_plan_sm90_persistent(&p, &o, 1025, d64) == 1, "sm90: sm90_grid = 2 forces the persistent grid on a window");
}

static void test_sm90_heads(void)
{
    /* K and V of a head: 4 · Nk · d bytes (2 MB at 8k keys, d = 64); 32 MB per section. */
    static const struct {
        int64_t B, Hq, Hkv, N, d;
        int causal, persistent, heads, want;
        const char *what;
    } cases[] = {
        {2, 32, 32, 8192, 64, 1, 0, 0, 16, "d = 64, 8k keys, one CTA per tile: 16 heads"},
        {2, 32, 32, 8192, 64, 1, 1, 0, 1, "the persistent grid walks head by head"},
        {2, 16, 16, 8192, 128, 1, 0, 0, 8, "d = 128, 8k keys: 8 heads"},
        {1, 8, 8, 16384, 256, 1, 0, 0, 2, "d = 256, 16k keys: 2 heads"},
        {1, 16, 16, 65536, 256, 1, 0, 0, 1, "a head past 32 MB walks alone"},
        {3, 5, 5, 8192, 64, 1, 0, 0, 15, "at most B · Hq heads"},
        {1, 14, 14, 8192, 128, 1, 0, 0, 7, "a divisor of B · Hq (8 -> 7 of 14)"},
        {2, 32, 8, 8192, 128, 1, 0, 0, 32, "GQA, a kv head's K and V shared by its 4 heads"},
        {2, 16, 16, 8192, 128, 0, 0, 0, 1, "non-causal walks head by head"},
        {2, 16, 16, 8192, 128, 0, 0, 4, 1, "sm90_heads leaves non-causal calls head by head"},
        {2, 16, 16, 2048, 128, 1, 1, 4, 4, "sm90_heads = 4 on the persistent grid"},
        {2, 32, 32, 8192, 64, 1, 0, 1, 1, "sm90_heads = 1 walks head by head"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fa_overrides o;
        memset(&o, 0, sizeof o);
        o.sm90_heads = cases[i].heads;
        fa_params p = shape(cases[i].B, cases[i].Hq, cases[i].N, cases[i].N, cases[i].d, cases[i].causal);
        p.Hkv = cases[i].Hkv;
        char what[128];
        snprintf(what, sizeof what, "sm90 sections: %s", cases[i].what);
        check(fa_plan_sm90_heads(&p, &o, cases[i].persistent) == cases[i].want, what);
    }
    /* The packed walk: sections of a sequence's Hq heads, all of them unless forced. */
    static const struct {
        int64_t Hq;
        int heads, want;
        const char *what;
    } packed[] = {
        {16, 0, 16, "the packed walk: all Hq heads in one section"},
        {16, 4, 4, "the packed walk: sm90_heads = 4"},
        {10, 4, 2, "the packed walk: a divisor of Hq (4 -> 2 of 10)"},
        {10, 30, 10, "the packed walk: at most Hq"},
    };
    for (size_t i = 0; i < sizeof packed / sizeof packed[0]; i++) {
        fa_overrides o;
        memset(&o, 0, sizeof o);
        o.sm90_heads = packed[i].heads;
        fa_params p = shape(2, packed[i].Hq, 8192, 8192, 128, 1);
        check(fa_plan_sm90_packed_heads(&p, &o) == packed[i].want, packed[i].what);
    }
    /* Its places: every (head, rank) of a sequence exactly once; causal, section by section (the
     * first s · nt items hold heads 0..s-1), each rank by rank (rank = r / s within a section);
     * else head by head. Hq 1-12, each divisor s, 1-5 tiles. */
    int once = 1, order = 1;
    for (int Hq = 1; Hq <= 12; Hq++)
        for (int s = 1; s <= Hq; s++)
            for (int nt = 1; nt <= 5; nt++)
                for (int causal = 0; causal < 2; causal++) {
                    if (Hq % s != 0 || (!causal && s > 1))
                        continue;
                    unsigned char seen[12][5];
                    memset(seen, 0, sizeof seen);
                    for (int r = 0; r < Hq * nt; r++) {
                        int h = -1, rank = -1;
                        fa_plan_packed_place(r, nt, s, causal, &h, &rank);
                        if (h < 0 || h >= Hq || rank < 0 || rank >= nt || seen[h][rank]++) {
                            once = 0;
                            continue;
                        }
                        const int sec = r / (s * nt), in = r % (s * nt);
                        if (causal ? h / s != sec || rank != in / s : h != r / nt || rank != r % nt)
                            order = 0;
                    }
                }
    check(once, "the packed walk's places: every head and tile once");
    check(order, "the packed walk's places: sections of s heads rank by rank (causal), else head by head");
}

static void test_sm90_walk(void)
{
    fa_overrides o;
    memset(&o, 0, sizeof o);
    const fa_sm90_shape d64 = {64, 128, 192, 3, 1, 0}, d128l = {128, 80, 192, 3, 1, 1};
    size_t bytes = 1;

    /* FlashAttention's grid at d = 64, 1k keys: 3072 tiles of 192 rows, 512 of them (each head's
     * last, 64 rows) with one busy warpgroup of three, moved last: 22.7 modelled rounds, not 24. */
    fa_params p = shape(16, 32, 1024, 1024, 64, 0);
    fa_sm90_walk w = fa_plan_sm90_walk(&p, &o, d64, 6, 3072, 132, 1, &bytes);
    const double r = fa_plan_walk_rounds(132, w.n_full, 0, 0.0, 3072 - w.n_full, 2.0 / 3.0);
    check(w.n_full == 2560 && w.parts == 1 && bytes == 0, "sm90 walk d=64 1k: the 512 light tiles move last");
    check(fabs(r - 22.67) < 0.01 && fa_plan_walk_rounds(132, 3072, 0, 0.0, 0, 0.0) == 24.0,
          "sm90 walk d=64 1k: 22.7 rounds against 24");

    /* Causal walks and grids of fewer tiles than CTAs are never rearranged. */
    p = shape(16, 32, 1024, 1024, 64, 1);
    w = fa_plan_sm90_walk(&p, &o, d64, 6, 3072, 132, 1, &bytes);
    check(w.n_full == 3072 && w.parts == 1, "sm90 walk: causal walks stay in order");

    /* d = 128 from 2k keys (the three-consumer tile that may split): 16k keys, B = 1, H = 16:
     * 86 query tiles per head. The split, when chosen, saves a tenth of a round and its scratch
     * holds each part's O and lse. */
    p = shape(1, 16, 16384, 16384, 128, 0);
    const int64_t n_tiles = 86 * 16;
    w = fa_plan_sm90_walk(&p, &o, d128l, 86, n_tiles, 132, 1, &bytes);
    const double whole = fa_plan_walk_rounds(132, w.n_full, 0, 0.0, n_tiles - w.n_full, 2.0 / 3.0);
    int ok = w.parts >= 1 && w.parts <= 4;
    if (w.parts > 1) {
        const double split = fa_plan_walk_rounds(132, w.n_whole, w.split * w.parts, 1.0 / w.parts,
                                                 n_tiles - w.n_full, 2.0 / 3.0);
        ok &= bytes == (size_t)(w.split * w.parts * 192) * 129 * sizeof(float) && split < whole;
    }
    check(ok && w.parts == 2, "sm90 walk d=128 16k: the last round in 2 parts, scratch for each");
    fa_sm90_walk nosplit = fa_plan_sm90_walk(&p, &o, d128l, 86, n_tiles, 132, 0, &bytes);
    check(nosplit.parts == 1 && bytes == 0, "sm90 walk: without scratch nothing splits");

    /* Overrides: sm90_tail = 1 splits nothing; 3 forces three parts where there is a tail, on the
     * tile that splits only. */
    o.sm90_tail = 1;
    w = fa_plan_sm90_walk(&p, &o, d128l, 86, n_tiles, 132, 1, &bytes);
    check(w.parts == 1 && bytes == 0, "sm90 walk: sm90_tail = 1 splits nothing");
    o.sm90_tail = 3;
    w = fa_plan_sm90_walk(&p, &o, d128l, 86, n_tiles, 132, 1, &bytes);
    check(w.parts == 3 && bytes > 0, "sm90 walk: sm90_tail = 3 forces three parts");
    p = shape(16, 32, 1024, 1024, 64, 0);
    w = fa_plan_sm90_walk(&p, &o, d64, 6, 3072, 132, 1, &bytes);
    check(w.parts == 1, "sm90 walk: a tile that does not split ignores sm90_tail");
}

static void test_split_kv(void)
{
    fa_overrides o;
    memset(&o, 0, sizeof o);
    fa_params p = shape(1, 16, 64, 1 << 20, 128, 0);
    check(fa_plan_split_kv(&p, &o, 132, 1) == 1, "split-KV: 64 queries over 1M keys take the split-KV kernel");
    p.Nk = FA_SPLIT_KV_MIN_KEYS - 1;
    check(fa_plan_split_kv(&p, &o, 132, 1) == 0, "split-KV: 64 rows per KV head below 32k keys, the forward kernels");
    p = shape(2, 64, 128, 1 << 16, 128, 0);            /* 128 query tiles: most of the GPU */
    check(fa_plan_split_kv(&p, &o, 132, 1) == 1, "split-KV: 128 query tiles on 132 SMs");
    p.Hq = p.Hkv = 66;                                  /* 132 query tiles fill the GPU */
    check(fa_plan_split_kv(&p, &o, 132, 1) == 0, "split-KV: a full GPU of query tiles stays");
    p = shape(1, 16, 1, 1 << 20, 128, 1);
    check(fa_plan_split_kv(&p, &o, 132, 1) == 0, "split-KV: top-left causal with Nq < Nk stays on the forward kernels");
    p.causal = 0;
    o.family = FA_FAMILY_SM80;
    check(fa_plan_split_kv(&p, &o, 132, 1) == 0, "split-KV: a forced family runs itself");
    o.family = FA_FAMILY_AUTO;

    /* The few-rows rule: up to 32 query rows per KV head at any length, fp16 / bf16, sm_80+. */
    p = shape(8, 32, 1, 2048, 128, 0);
    p.Hkv = 8;                                          /* 4 rows per KV head */
    check(fa_plan_split_kv(&p, &o, 132, 1) == 1, "split-KV: a decoding step (4 rows per KV head) at 2k keys");
    p.Nq = 8;                                           /* 32 rows */
    check(fa_plan_split_kv(&p, &o, 132, 1) == 1, "split-KV: 8 queries of a group of 4");
    p.Nq = 9;
    check(fa_plan_split_kv(&p, &o, 132, 1) == 0, "split-KV: 36 rows per KV head, the forward kernels");
    p.Nq = 1;
    check(fa_plan_split_kv(&p, &o, 132, 0) == 0, "split-KV: no decoding step route below compute capability 8.0");
    p.dtype = FA_FLOAT32;
    check(fa_plan_split_kv(&p, &o, 132, 1) == 0, "split-KV: no decoding step route for fp32");
    p.dtype = FA_BFLOAT16;
    p.causal = 1;
    check(fa_plan_split_kv(&p, &o, 132, 1) == 0, "split-KV: top-left causal, one query over 2k keys: not its diagonal");
    p.Nk = 1;
    check(fa_plan_split_kv(&p, &o, 132, 1) == 1, "split-KV: causal with Nq = Nk is bottom-right too");

    p = shape(1, 16, 1, 1 << 20, 128, 0);
    o.split_kv = 1;
    check(fa_plan_split_kv(&p, &o, 132, 1) == 0, "split-KV: split_kv = 1 keeps the forward kernels");
    o.split_kv = 2;
    p = shape(8, 16, 512, 512, 128, 0);
    check(fa_plan_split_kv(&p, &o, 132, 1) == 1, "split-KV: split_kv = 2 takes 512 queries over 512 keys");
    p = shape(8, 16, 4, 512, 128, 1);
    check(fa_plan_split_kv(&p, &o, 132, 1) == 0, "split-KV: split_kv = 2 leaves top-left causal with Nq != Nk");
}

/* The padded decoding step: variants with few queries per KV head. */
static void test_decode_variants(void)
{
    fa_overrides o;
    memset(&o, 0, sizeof o);
    fa_variants v;
    memset(&v, 0, sizeof v);
    static const uint8_t km[1];
    v.key_mask = km;
    v.align = FA_ALIGN_BOTTOM_RIGHT;
    fa_params p = shape(8, 16, 1, 2048, 128, 1);
    p.Hkv = 4;                                          /* G = 4: 4 rows of one tile */
    check(fa_plan_decode_variants(&p, &v, &o) == 1, "decode variants: a padded decoding step takes the split-KV kernel");
    p.Nq = 8;                                           /* 32 rows */
    check(fa_plan_decode_variants(&p, &v, &o) == 1, "decode variants: 8 queries of a group of 4 fill two tiles");
    p.Nq = 9;
    check(fa_plan_decode_variants(&p, &v, &o) == 0, "decode variants: past two tiles, the forward kernels");
    o.split_kv = 2;
    check(fa_plan_decode_variants(&p, &v, &o) == 1, "decode variants: split_kv = 2 takes more rows");
    o.split_kv = 1;
    p.Nq = 1;
    check(fa_plan_decode_variants(&p, &v, &o) == 0, "decode variants: split_kv = 1 never");
    o.split_kv = 0;
    v.align = FA_ALIGN_TOP_LEFT;                        /* query 0 at key 0: another δ */
    check(fa_plan_decode_variants(&p, &v, &o) == 0, "decode variants: top-left causal keeps the forward kernels");
    p.causal = 0;
    check(fa_plan_decode_variants(&p, &v, &o) == 1, "decode variants: top-left without causal, window or ALiBi");
    v.window = 1;
    v.window_left = 100;
    v.window_right = -1;
    check(fa_plan_decode_variants(&p, &v, &o) == 0, "decode variants: a top-left window keeps the forward kernels");
    v.window = 0;
    v.mask = km;
    check(fa_plan_decode_variants(&p, &v, &o) == 0, "decode variants: a mask tensor keeps the forward kernels");
    v.mask = NULL;
    p.dtype = FA_FLOAT32;
    check(fa_plan_decode_variants(&p, &v, &o) == 0, "decode variants: fp32 has no such kernel");
    p.dtype = FA_BFLOAT16;
    o.family = FA_FAMILY_SM80;
    check(fa_plan_decode_variants(&p, &v, &o) == 0, "decode variants: a forced family runs itself");
}

/* cps: attend CTAs per split = row tiles (ceil(Nq · G / 16)) · B · Hkv. */
static int64_t cps_of(int64_t B, int64_t Hq, int64_t Hkv)
{
    return (Hq / Hkv + 15) / 16 * B * Hkv;
}

static void test_decode_splits(void)
{
    /* d = 64, one query: the counts tests/test_kvcache.py documents for an H200 (132 SMs, the
     * d = 64 tile at 3 CTAs per SM). */
    const int64_t wave = 132 * 3;
    check(fa_plan_decode_splits_d64(wave, cps_of(1, 32, 8), 132, 131072) == 31, "decode d=64 B=1 H32/8 128k: 31 splits");
    check(fa_plan_decode_splits_d64(wave, cps_of(1, 32, 32), 132, 32768) == 8, "decode d=64 B=1 H32/32 32k: 8 splits");
    check(fa_plan_decode_splits_d64(wave, cps_of(8, 32, 8), 132, 4096) == 4, "decode d=64 B=8 H32/8 4k: 4 splits");
    check(fa_plan_decode_splits_d64(wave, cps_of(32, 32, 8), 132, 4096) == 1, "decode d=64 B=32 H32/8 4k: 1 split");
    check(fa_plan_decode_splits_d64(wave, cps_of(16, 32, 32), 132, 4096) == 2, "decode d=64 B=16 H32/32 4k: 2 splits");
    check(fa_plan_decode_splits_d64(wave, cps_of(56, 32, 8), 132, 2048) == 2, "decode d=64 B=56 H32/8 2k: 2 splits");
    check(fa_plan_decode_splits_d64(wave, cps_of(1, 32, 8), 132, 256) == 1
          && fa_plan_decode_splits_d64(wave, cps_of(1, 32, 8), 132, 600) == 3,
          "decode d=64: at most one split per 256 keys, rounded up");

    /* The wave rule: the fewest splits whose wave efficiency is within 5 % of the best, up to one
     * split per 128 keys and four waves; checked against its definition. */
    int same = 1;
    for (int64_t w = 64; w <= 528; w += 66)
        for (int64_t cps = 1; cps <= 700; cps += 37)
            for (int64_t nk = 1; nk <= 40000; nk += 4999) {
                int64_t most = (nk + 127) / 128, four = (4 * w + cps - 1) / cps;
                most = most < four ? most : four;
                double best = 0.0;
                for (int64_t s = 1; s <= most; s++) {
                    const double e = (double)(s * cps) / (double)(((s * cps + w - 1) / w) * w);
                    best = e > best ? e : best;
                }
                int64_t want = 1;
                while (want < most && (double)(want * cps) / (double)(((want * cps + w - 1) / w) * w) < 0.95 * best)
                    want++;
                same &= fa_plan_decode_splits_by_waves(w, cps, nk) == want;
            }
    check(same, "decode wave rule equals its definition");
}

static void test_overrides(void)
{
    fa_overrides o, got;
    memset(&o, 0, sizeof o);
    o.family = FA_FAMILY_SIMT;
    o.decode_splits = 7;
    check(fa_set_overrides(&o) == FA_OK, "overrides: a valid set is taken");
    fa_get_overrides(&got);
    check(memcmp(&o, &got, sizeof o) == 0, "overrides: read back as set");
    o.decode_warps = 5;
    check(fa_set_overrides(&o) == FA_ERR_OVERRIDE, "overrides: decode_warps = 5 is refused");
    o.decode_warps = 0;
    o.split_kv = 3;
    check(fa_set_overrides(&o) == FA_ERR_OVERRIDE, "overrides: split_kv = 3 is refused");
    o.split_kv = 0;
    o.decode_warps = 0;
    o.device_cc = 69;
    check(fa_set_overrides(&o) == FA_ERR_OVERRIDE, "overrides: device_cc = 69 is refused");
    o.device_cc = 90;
    check(fa_set_overrides(&o) == FA_ERR_OVERRIDE, "overrides: device_cc = 90 is refused");
    o.device_cc = 76;
    check(fa_set_overrides(&o) == FA_ERR_OVERRIDE, "overrides: device_cc = 76 (no such GPU) is refused");
    o.device_cc = 75;
    check(fa_set_overrides(&o) == FA_OK, "overrides: device_cc = 75 is taken");
    o.device_cc = 0;
    check(fa_set_overrides(&o) == FA_OK, "overrides: device_cc = 0 is taken");
    o.device_cc = 0;
    o.family = FA_NUM_FAMILIES;
    check(fa_set_overrides(&o) == FA_ERR_KERNEL_CHOICE, "overrides: an unknown family is refused");
    fa_get_overrides(&got);
    check(got.family == FA_FAMILY_SIMT && got.decode_splits == 7, "overrides: a refused set changes nothing");
    check(fa_set_overrides(NULL) == FA_OK, "overrides: NULL resets");
    fa_get_overrides(&got);
    memset(&o, 0, sizeof o);
    check(memcmp(&o, &got, sizeof o) == 0, "overrides: all automatic after the reset");
    check(strcmp(fa_last_cuda_error(), "") == 0, "no CUDA error recorded");
}

int main(void)
{
    test_walk_rounds();
    test_sm90_grid();
    test_sm90_counter();
    test_sm90_window_snake();
    test_sm90_heads();
    test_sm90_walk();
    test_split_kv();
    test_decode_variants();
    test_decode_splits();
    test_overrides();
    printf("%d checks, %d failed\n", checks, failures);
    return failures != 0;
}
