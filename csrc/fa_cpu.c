/*
 * fa_cpu.c — the C backend: FlashAttention forward on the CPU (C11 + OpenMP).
 *
 * The same algorithm as the GPU kernels, written to be read beside the
 * FlashAttention-2 paper (Algorithm 1). For each (batch, head, block of BM
 * query rows), in parallel over OpenMP threads (a few query rows of several
 * heads that share a kv head form one block; run_blocks):
 *
 *     Q_i  = Q[i0 : i0+BM] · scale · log2(e)          (exp2 instead of exp; past |scale · log2 e| = 1
 *                                                      a power of two of it scales S: fa_q_multiplier)
 *     m_i  = -inf, l_i = 0, O_i = 0
 *     for each block of BN keys j0 (stopping at the diagonal when causal):
 *         S    = Q_i K_jᵀ                              (BM × BN)
 *         mask the keys past Nk and, when causal, the keys j > i
 *         m_new = max(m_i, rowmax(S))
 *         P    = exp2(S − m_new)
 *         l_i  = l_i · exp2(m_i − m_new) + rowsum(P)
 *         O_i  = O_i · exp2(m_i − m_new) + P V_j
 *         m_i  = m_new
 *     O   = O_i / l_i,     lse = (m_i + log2 l_i) · ln 2
 *
 * Inputs of any dtype are converted to fp32 tile by tile; all arithmetic is
 * fp32. No Nq × Nk buffer exists: each thread owns ~(3·BM + 2·BN)·d floats.
 * The two matmuls run through one register-blocked micro-kernel written with
 * GCC/Clang vector types; on x86-64 the tile function is compiled for AVX-512,
 * AVX2 and baseline and the best one is picked at load time. The micro-kernel,
 * the softmax's lane helpers (select, max, 2^x, tanh) and the softmax steps that
 * run across a block's queries (forward and backward) live in fa_lanes.h, written
 * once for 16-float and 8-float vectors: without AVX-512 the 8-float forms run
 * (wide_vectors), as GCC compiles 16-float code lane by lane there.
 *
 * In order: dtype conversion, the lane helpers (fa_lanes.h twice; wide_vectors picks a width;
 * scale_scores and tanh_scaled on whole rows of Sᵀ), the GEMM (gemm: gemm16 or gemm8), the
 * row-by-row forms for blocks of a few query rows (scores_narrow, softmax_narrow, pv_narrow), the
 * forward (attend_rows, which attend_block calls with a full block's sizes as constants, its
 * softmax softmax_cols16 or softmax_cols8; score changes (softcap, ALiBi, a float mask) applied per
 * block by apply_variants, visibility by mask_keys), the entry points (ALiBi slopes and sinks
 * checked on the host first), the KV cache's, and at the end the backward pass (backward_block:
 * FlashAttention-2's formulas on the same tiles and micro-kernel, P and dS by fa_lanes.h's
 * max_sum_cols, probs_cols and dscores_cols, one (sequence, kv head) per thread so that dK and dV
 * need no atomics).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "fa.h"
#include "fa_internal.h"
#include "fa_variant.h"

enum {
    BM = 64,   /* query rows per work item (a multiple of NR) */
    BN = 64,   /* keys per inner block */
    MR = 8,    /* micro-kernel rows */
    NR = 32,   /* micro-kernel columns (two 16-float vectors) */
    KC = 32,   /* a fresh product's inner dimension summed in parts of KC (gemm) */
};

typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
typedef double v8d __attribute__((vector_size(64)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FA_MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FA_MULTIVERSION
#endif
/* The helpers the tile functions call: inlined always, so that each clone compiles them for its own
 * target (an out-of-line copy is compiled for the baseline x86-64: gemm there ran 42 % of an AVX2
 * machine's backward). gemm alone is out of line with clones of its own (FA_MULTIVERSION): inlined at
 * each of its six calls it made fa_cpu.c compile in 56 s against 27 s, for 2-3 % of the forward. */
#define FA_INLINE inline __attribute__((always_inline))

/* ------------------------------------------------------------------------ */
/* dtype conversion (round to nearest even; NaN stays NaN)                   */

static inline float bits_to_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t float_to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float bf16_to_float(uint16_t h) { return bits_to_float((uint32_t)h << 16); }

static inline uint16_t float_to_bf16(float f)
{
    uint32_t u = float_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);          /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1);                   /* round half to even */
    return (uint16_t)(u >> 16);
}

static inline float half_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f)                                  /* inf, NaN */
        return bits_to_float(sign | 0x7f800000u | (man << 13));
    if (exp != 0)                                     /* normal: rebias 15 -> 127 */
        return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
    const float sub = (float)man * 0x1p-24f;          /* zero or subnormal: man · 2^-24 */
    return bits_to_float(sign | float_to_bits(sub));
}

static inline uint16_t float_to_half(float f)
{
    uint32_t u = float_to_bits(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    u &= 0x7fffffffu;
    if (u >= 0x47800000u)                             /* |f| >= 65536, inf, NaN */
        return sign | (u > 0x7f800000u ? 0x7e00 : 0x7c00);
    if (u < 0x38800000u) {                            /* result is subnormal or zero */
        /* Adding 0.5 aligns the half's subnormal grid with the float's last
         * mantissa bits; the FPU's own rounding (nearest even) does the rest. */
        const float r = bits_to_float(u) + 0.5f;
        return sign | (uint16_t)(float_to_bits(r) - 0x3f000000u);
    }
    u += 0xfffu + ((u >> 13) & 1);                    /* round half to even at bit 13 */
    u -= (uint32_t)(127 - 15) << 23;                  /* rebias; overflow carries into inf */
    return sign | (uint16_t)(u >> 13);
}

/* dst[c] = src[c] · mul for c < n, from any dtype. */
static inline void load_row(float *restrict dst, const void *src, int64_t n, fa_dtype dt, float mul)
{
    if (dt == FA_FLOAT32) {
        const float *s = (const float *)src;
        for (int64_t c = 0; c < n; c++) dst[c] = s[c] * mul;
    } else if (dt == FA_FLOAT16) {
        const uint16_t *s = (const uint16_t *)src;
        for (int64_t c = 0; c < n; c++) dst[c] = half_to_float(s[c]) * mul;
    } else {
        const uint16_t *s = (const uint16_t *)src;
        for (int64_t c = 0; c < n; c++) dst[c] = bf16_to_float(s[c]) * mul;
    }
}

static inline void store_row(void *dst, const float *restrict src, int64_t n, fa_dtype dt, float mul)
{
    if (dt == FA_FLOAT32) {
        float *o = (float *)dst;
        for (int64_t c = 0; c < n; c++) o[c] = src[c] * mul;
    } else if (dt == FA_FLOAT16) {
        uint16_t *o = (uint16_t *)dst;
        for (int64_t c = 0; c < n; c++) o[c] = float_to_half(src[c] * mul);
    } else {
        uint16_t *o = (uint16_t *)dst;
        for (int64_t c = 0; c < n; c++) o[c] = float_to_bf16(src[c] * mul);
    }
}

static inline size_t dtype_size(fa_dtype dt) { return dt == FA_FLOAT32 ? 4 : 2; }

/* ------------------------------------------------------------------------ */
/* Softmax pieces on 16-float vectors.                                        */

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));

#define V v16f
#define I v16i
#define D v8d
#define LANES 16
#define LANE_LO 0, 1, 2, 3, 4, 5, 6, 7
#define LANE_HI 8, 9, 10, 11, 12, 13, 14, 15
#include "fa_lanes.h"
#define V v8f
#define I v8i
#define D v4d
#define LANES 8
#define LANE_LO 0, 1, 2, 3
#define LANE_HI 4, 5, 6, 7
#include "fa_lanes.h"

/* Whether the 16-float vectors map onto the machine's registers: the x86-64-v4 clone (AVX-512). On the
 * AVX2 and baseline clones GCC 12 builds a broadcast of a float lane by lane and keeps arrays of
 * 16-float vectors in memory, and turns 16-lane comparisons and integer operations into code lane by
 * lane (prefill 3.4 GFLOP/s on 2 AVX2 cores, 0.03x SDPA), so the code below runs the 8-float forms
 * there (gemm8, softmax_cols8, ...), or takes each 16-float vector's halves apart. Both give the same
 * bits; fa_overrides.cpu_lanes forces either (tests run both on any CPU). */
static FA_INLINE int wide_vectors(void)
{
    const int forced = fa_cpu_lanes_override();
    if (forced != 0)
        return forced == 2;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    return __builtin_cpu_supports("x86-64-v4");
#else
    return 1;
#endif
}

/* Sᵀ[j · BM + c] *= mul for keys j < bn and columns c < cols rounded up to 16 (1: nothing); 8-float
 * vectors on either width, a product per float. */
static FA_INLINE void scale_scores(float *restrict st, int bn, int cols, float mul)
{
    if (mul == 1.0f)
        return;
    for (int j = 0; j < bn; j++)
        for (int g = 0; g < (cols + 15) / 16 * 2; g++)
            ((v8f *)(st + (int64_t)j * BM))[g] *= mul;
}

/* dst[x] = tanh(src[x] · inv) for n floats, n a multiple of 16 (vtanh16, or vtanh8: the same bits);
 * dst may be src. */
static FA_INLINE void tanh_scaled(float *dst, const float *src, int64_t n, float inv)
{
    if (wide_vectors()) {
        for (int64_t x = 0; x < n; x += 16) {
            v16f y;
            memcpy(&y, src + x, sizeof y);
            y = vtanh16(y * inv);
            memcpy(dst + x, &y, sizeof y);
        }
        return;
    }
    for (int64_t x = 0; x < n; x += 8) {
        v8f y;
        memcpy(&y, src + x, sizeof y);
        y = vtanh8(y * inv);
        memcpy(dst + x, &y, sizeof y);
    }
}

/* ------------------------------------------------------------------------ */
/* C[M×N] = A[M×K] · B[K×N], or with c_scale: C[r][:] = C[r][:] · c_scale[r] + */
/* (A B)[r][:]. A is read through two strides, A[r·a_rs + k·a_cs], so it can   */
/* be a transposed view; B and C are row-major with 64-byte aligned rows;      */
/* M % MR == 0, N % NR == 0. Each MR × NR block of A B is summed in 16 vector */
/* accumulators from zero and only then added to C: a block's keys are summed */
/* apart from the running output, which keeps fp32 rounding error low. For    */
/* the same reason a product written fresh (no c_scale: S over d, dQ over the */
/* keys) is summed KC terms of K at a time, each part added to C, so that it  */
/* rounds about as √KC + √(K / KC) steps rather than √K: at d = 210, 1.7e-6   */
/* rms against 3.8e-6 for randn rows (this CPU's torch matmul: 3.8e-6).       */
/* gemm16 and gemm8 (fa_lanes.h) sum each element of C alike, bit for bit.   */

FA_MULTIVERSION __attribute__((noinline))
static void gemm(float *restrict C, int64_t ldc, const float *restrict A, int64_t a_rs, int64_t a_cs,
                 const float *restrict B, int64_t ldb, int M, int N, int64_t K, const float *restrict c_scale)
{
    if (wide_vectors())
        gemm16(C, ldc, A, a_rs, a_cs, B, ldb, M, N, K, c_scale);
    else
        gemm8(C, ldc, A, a_rs, a_cs, B, ldb, M, N, K, c_scale);
}

/* ------------------------------------------------------------------------ */
/* Narrow blocks (up to MR rows, a decoding step): row by row.                */

/* The sum of 8 lanes, by halves. */
static FA_INLINE float hsum8(v8f a)
{
    v4f c, e;
    memcpy(&c, &a, sizeof c);
    memcpy(&e, (const char *)&a + sizeof c, sizeof e);
    c += e;
    return (c[0] + c[2]) + (c[1] + c[3]);
}

/* The sum of a vector's 16 lanes, by halves. */
static FA_INLINE float hsum(v16f x)
{
    v8f a, b;
    memcpy(&a, &x, sizeof a);
    memcpy(&b, (const char *)&x + sizeof a, sizeof b);
    return hsum8(a + b);
}

/* 16 floats from any address. */
static inline v16f load16(const float *x)
{
    v16f v;
    memcpy(&v, x, sizeof v);
    return v;
}

/* A narrow block's products (at most MR columns: a decoding step of one or a few query heads per
 * kv head), as dot products over d instead of the micro-kernel, which would fill 32 columns of Sᵀ
 * and MR rows of O for them. Sᵀ[j][r] = K[j] · Q[r] over dv columns (d rounded up to 16); K's rows
 * are ks floats apart: the scratch tile's, or fp32 inputs read in place. */
static FA_INLINE void scores_narrow(float *restrict st, const float *restrict k, int64_t ks,
                                    const float *restrict q, int rows, int bn, int64_t dp, int64_t dv)
{
    if (!wide_vectors()) {                              /* each half of hsum's vector apart: the same sums */
        for (int j = 0; j < bn; j++) {
            for (int r = 0; r < rows; r++) {
                v8f lo = {0}, hi = {0};
                for (int64_t c = 0; c < dv; c += 16) {
                    v8f k0, k1;
                    memcpy(&k0, k + j * ks + c, sizeof k0);
                    memcpy(&k1, k + j * ks + c + 8, sizeof k1);
                    lo += k0 * *(const v8f *)(q + r * dp + c);
                    hi += k1 * *(const v8f *)(q + r * dp + c + 8);
                }
                st[j * BM + r] = hsum8(lo + hi);
            }
        }
        return;
    }
    for (int j = 0; j < bn; j++) {
        for (int r = 0; r < rows; r++) {
            v16f acc = {0};
            for (int64_t c = 0; c < dv; c += 16)
                acc += load16(k + j * ks + c) * *(const v16f *)(q + r * dp + c);
            st[j * BM + r] = hsum(acc);
        }
    }
}

/* The online softmax of a narrow block, row by row in whole vectors of keys (the column-wise
 * softmax below would fill a 16-lane vector for each key): the masked scores of row r are taken
 * from Sᵀ into P[r] (keys bn..BN as −inf), m, l updated as there, alpha[r] = exp2(m_old − m_new). */
static FA_INLINE void softmax_narrow(float *restrict p, const float *restrict st, float *restrict m,
                                     float *restrict l, float *restrict alpha, int rows, int bn)
{
    if (!wide_vectors()) {                              /* each 16-float vector's halves apart: the same bits */
        for (int r = 0; r < rows; r++) {
            float *pr = p + r * BN;
            for (int j = 0; j < BN; j++)
                pr[j] = j < bn ? st[j * BM + r] : -INFINITY;
            v8f mx[2] = {(v8f){0} - INFINITY, (v8f){0} - INFINITY};
            for (int g = 0; g < BN / 8; g++)
                mx[g % 2] = vmax8(mx[g % 2], ((const v8f *)pr)[g]);
            float m_new = m[r];
            for (int e = 0; e < 16; e++)
                m_new = m_new > mx[e / 8][e % 8] ? m_new : mx[e / 8][e % 8];
            const v8f m_ref = (v8f){0} + (m_new == -INFINITY ? 0.0f : m_new);
            alpha[r] = exp2_neg8(((v8f){0} + m[r]) - m_ref)[0];
            v8f sum[2] = {{0}};
            for (int g = 0; g < BN / 8; g++) {
                v8f *pg = (v8f *)pr + g;
                *pg = exp2_neg8(*pg - m_ref);
                sum[g % 2] += *pg;
            }
            l[r] = l[r] * alpha[r] + hsum8(sum[0] + sum[1]);
            m[r] = m_new;
        }
        return;
    }
    for (int r = 0; r < rows; r++) {
        float *pr = p + r * BN;
        for (int j = 0; j < BN; j++)
            pr[j] = j < bn ? st[j * BM + r] : -INFINITY;
        v16f mx = (v16f){0} - INFINITY;
        for (int g = 0; g < BN / 16; g++)
            mx = vmax16(mx, ((const v16f *)pr)[g]);
        float m_new = m[r];
        for (int e = 0; e < 16; e++)
            m_new = m_new > mx[e] ? m_new : mx[e];
        /* A row that has seen only −inf so far uses 0 as its reference. */
        const v16f m_ref = (v16f){0} + (m_new == -INFINITY ? 0.0f : m_new);
        alpha[r] = exp2_neg16(((v16f){0} + m[r]) - m_ref)[0];
        v16f sum = (v16f){0};
        for (int g = 0; g < BN / 16; g++) {
            v16f *pg = (v16f *)pr + g;
            *pg = exp2_neg16(*pg - m_ref);
            sum += *pg;
        }
        l[r] = l[r] * alpha[r] + hsum(sum);
        m[r] = m_new;
    }
}

/* O[r] = O[r] · alpha[r] + Σ_j P[r][j] V[j] for the rows of a narrow block (columns up to dv; V's
 * rows vs floats apart): the block's keys summed from zero apart from the running output, as the
 * micro-kernel does, four vectors of a row at a time in registers over all the keys (a row's
 * accumulators indexed at run time stayed in memory: 8 query heads a kv head at 4k keys, d = 64,
 * 1.8 → 1.4 ms on 2 AVX2 cores). */
static FA_INLINE void pv_narrow(float *restrict o, const float *restrict p, const float *restrict v, int64_t vs,
                                const float *restrict alpha, int rows, int bn, int64_t dp, int64_t dv)
{
    if (!wide_vectors()) {                              /* 8-float vectors: the same sums (wide_vectors) */
        const int64_t nv = dv / 8;
        for (int r = 0; r < rows; r++) {
            const float *pr = p + r * BN;
            v8f *orow = (v8f *)(o + r * dp);
            int64_t c0 = 0;
            for (; c0 + 4 <= nv; c0 += 4) {             /* 4 vectors of O's row in registers over the keys */
                v8f acc[4] = {{0}};
                for (int j = 0; j < bn; j++)
                    for (int c = 0; c < 4; c++) {
                        v8f x;
                        memcpy(&x, v + j * vs + 8 * (c0 + c), sizeof x);
                        acc[c] += pr[j] * x;
                    }
                for (int c = 0; c < 4; c++)
                    orow[c0 + c] = orow[c0 + c] * alpha[r] + acc[c];
            }
            for (; c0 < nv; c0++) {
                v8f acc = {0};
                for (int j = 0; j < bn; j++) {
                    v8f x;
                    memcpy(&x, v + j * vs + 8 * c0, sizeof x);
                    acc += pr[j] * x;
                }
                orow[c0] = orow[c0] * alpha[r] + acc;
            }
        }
        return;
    }
    const int64_t nv = dv / 16;
    for (int r = 0; r < rows; r++) {
        const float *pr = p + r * BN;
        v16f *orow = (v16f *)(o + r * dp);
        int64_t c0 = 0;
        for (; c0 + 4 <= nv; c0 += 4) {
            v16f acc[4] = {{0}};
            for (int j = 0; j < bn; j++)
                for (int c = 0; c < 4; c++)
                    acc[c] += pr[j] * load16(v + j * vs + 16 * (c0 + c));
            for (int c = 0; c < 4; c++)
                orow[c0 + c] = orow[c0 + c] * alpha[r] + acc[c];
        }
        for (; c0 < nv; c0++) {
            v16f acc = {0};
            for (int j = 0; j < bn; j++)
                acc += pr[j] * load16(v + j * vs + 16 * c0);
            orow[c0] = orow[c0] * alpha[r] + acc;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The forward pass: scratch, masks, a block's rows, the walk over blocks.    */

/* One thread's tiles, fp32, in one 64-byte aligned allocation. Scores are kept
 * transposed (keys × queries), so the per-query softmax state m_i, l_i and all
 * softmax arithmetic run across queries in whole vectors. */
typedef struct {
    float *qt;   /* (d, BM)  Qᵀ · scale · log2(e); columns past Nq zero */
    float *k;    /* (BN, dp) K block */
    float *v;    /* (BN, dp) V block, columns d..dp zero */
    float *st;   /* (BN, BM) Sᵀ, then Pᵀ */
    float *o;    /* (BM, dp) unnormalised output accumulator */
    float *q;    /* (MR, dp) a narrow block's rows of Q · scale · log2(e), row-major */
    float *p;    /* (MR, BN) a narrow block's P, row-major */
    float *m;    /* (BM) running max per query, log2 units */
    float *l;    /* (BM) running sum of P per query */
    void *base;
} scratch;

/* n floats, zero, 64-byte aligned (free() releases them); NULL when out of memory. */
static float *zeroed_floats(size_t n)
{
    float *f = (float *)aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64);
    if (f != NULL)
        memset(f, 0, n * sizeof(float));
    return f;
}

static int scratch_alloc(scratch *t, int64_t dp)
{
    const size_t n_qt = dp * BM, n_k = BN * dp, n_v = BN * dp, n_st = BN * BM, n_o = BM * dp, n_q = MR * dp, n_p = MR * BN;
    float *f = zeroed_floats(n_qt + n_k + n_v + n_st + n_o + n_q + n_p + 2 * BM);   /* padding stays zero from here on */
    if (f == NULL)
        return 0;
    t->base = f;
    t->qt = f;       f += n_qt;
    t->k = f;        f += n_k;
    t->v = f;        f += n_v;
    t->st = f;       f += n_st;
    t->o = f;        f += n_o;
    t->q = f;        f += n_q;
    t->p = f;        f += n_p;
    t->m = f;        f += BM;
    t->l = f;
    return 1;
}

/* One (sequence, head): its rows' addresses and lengths. Plain batches and packed (varlen)
 * sequences differ only here. */
typedef struct {
    const char *q, *k, *v;   /* row 0 of this sequence and head (k, v NULL when nk == 0) */
    char *o;
    float *lse;              /* row 0's lse; rows are consecutive; NULL: not written */
    int64_t b, h;            /* for the masks, slopes and sinks */
    int64_t nq, nk, delta;   /* delta: where the diagonals sit (fa_delta) */
} seq_view;

static float mask_value(const fa_variants *v, fa_dtype dt, int64_t b, int64_t h, int64_t i, int64_t j)
{
    const int64_t at = b * v->mask_batch_stride + h * v->mask_head_stride + i * v->mask_row_stride
                     + j * v->mask_col_stride;
    switch (v->mask_kind) {
    case FA_MASK_BOOL:    return ((const uint8_t *)v->mask)[at] ? 0.0f : -INFINITY;
    case FA_MASK_ADD_F32: return ((const float *)v->mask)[at];
    default:
        return dt == FA_FLOAT32 ? ((const float *)v->mask)[at]
             : dt == FA_FLOAT16 ? half_to_float(((const uint16_t *)v->mask)[at])
                                : bf16_to_float(((const uint16_t *)v->mask)[at]);
    }
}

/* Visibility (key_mask, causal, the window): a masked-out key's scores become −inf across the block
 * at once (a row of Sᵀ), and a row's range is applied only to the blocks that cross it. Alone when no
 * variant changes a score; else apply_variants ends with it. */
static void mask_keys(const fa_params *p, const fa_variants *v, const seq_view *sv, int nh, int span, int ncols,
                      float *st, int64_t i0, int64_t j0, int bn)
{
    if (v->key_mask != NULL) {
        const uint8_t *km = v->key_mask + sv->b * v->key_mask_batch_stride + j0;
        for (int k = 0; k < bn; k++)
            if (km[k] == 0)
                for (int c = 0; c < ncols; c++)
                    st[k * BM + c] = -INFINITY;
    }
    for (int q = 0; q < span; q++) {
        int64_t lo, hi;
        fa_key_range(v, p->causal, i0 + q, sv->delta, sv->nk, &lo, &hi);
        if (lo <= j0 && hi >= j0 + bn)
            continue;
        for (int k = 0; k < bn; k++)
            if (j0 + k < lo || j0 + k >= hi)
                for (int hp = 0; hp < nh; hp++)
                    st[k * BM + hp * span + q] = -INFINITY;
    }
}

/* A float attn_mask added to one head's span columns of Sᵀ (log2 units), read along the mask's rows. */
static void add_mask(const fa_variants *v, fa_dtype dt, const seq_view *s_h, float *st, int span, int64_t i0,
                     int64_t j0, int bn)
{
    for (int q = 0; q < span; q++)
        for (int k = 0; k < bn; k++)
            st[k * BM + q] += fa_mask_log2(mask_value(v, dt, s_h->b, s_h->h, i0 + q, j0 + k));
}

/* The variants on one block of scores Sᵀ (keys j0 .. j0 + bn; column p · span + q is query i0 + q
 * of head sv[p], log2 units; ncols columns in all): each score becomes
 *     s = c2 · tanh(s / c2) − slope2 · |i + δ − j| + mask(i, j) · log2 e
 * (c2 = softcap · log2 e, slope2 = slope · log2 e; the softcap's tanh by tanh_scaled on whole rows, ALiBi
 * key row by key row, a float mask along its rows), then mask_keys makes a key outside the row's
 * range, or masked out, −inf. tt (may be NULL): tanh(s / c2) of these scores, laid out as st. */
static FA_INLINE void apply_variants(const fa_params *p, const fa_variants *v, const seq_view *sv, int nh,
                                     int span, int ncols, float *st, const float *tt, int64_t i0, int64_t j0,
                                     int bn)
{
    const float c2 = v->softcap * FA_VARIANT_LOG2E;
    if (c2 > 0.0f) {                                     /* s = c2 · tanh(s / c2), whole rows of Sᵀ */
        if (tt == NULL)
            tanh_scaled(st, st, (int64_t)bn * BM, 1.0f / c2);
        for (int64_t x = 0; x < (int64_t)bn * BM; x++)
            st[x] = c2 * (tt != NULL ? tt[x] : st[x]);
    }
    for (int hp = 0; hp < nh; hp++) {
        const seq_view *s_h = &sv[hp];
        const float slope2 = fa_alibi_slope2(v, s_h->b, s_h->h);
        if (slope2 != 0.0f)                              /* s −= slope · |i + delta − j| */
            for (int k = 0; k < bn; k++) {
                float *s = &st[k * BM + hp * span];
                const int64_t dist0 = i0 + s_h->delta - (j0 + k);
                for (int q = 0; q < span; q++) {
                    const int64_t dist = dist0 + q;
                    s[q] -= slope2 * (float)(dist < 0 ? -dist : dist);
                }
            }
        if (v->mask != NULL)
            add_mask(v, p->dtype, s_h, st + hp * span, span, i0, j0, bn);
    }
    mask_keys(p, v, sv, nh, span, ncols, st, i0, j0, bn);
}

/* Attention for query rows [i0, i0 + span) of nh heads of one sequence that share a kv head
 * (sv[0 .. nh), consecutive query heads): the block's columns are (head, row) pairs, column
 * p · span + q being row i0 + q of head sv[p], so that a few queries per head (a decoding step)
 * share one pass over K and V and the tiles are as wide as those rows, not BM. Row i sees the keys
 * causal and the window leave it (fa_key_range; without variants that is keys j <= i + delta when
 * causal: delta = 0 is SDPA's top-left mask, nk − nq the bottom-right one of a KV cache). Rows
 * that see no key get O = 0, lse = −inf. */
static FA_INLINE void attend_rows(const fa_params *p, const fa_variants *v, const scratch *t, int64_t dp,
                                  const seq_view *sv, int nh, int span, int64_t i0, int ncols, int mrows,
                                  int narrow)
{
    const int64_t d = p->d, Nk = sv->nk, delta = sv->delta;
    const int rows = nh * span;
    const int64_t dv = (d + 15) / 16 * 16;               /* a narrow block's columns of K and V */
    const int in_place = narrow && p->dtype == FA_FLOAT32 && dv == d;
    const size_t es = dtype_size(p->dtype);
    /* The per-score variants (alignment and packing live in sv); scores_mod: some change a score. */
    const int scores_mod = v->softcap != 0.0f || v->alibi_slopes != NULL || v->mask != NULL;
    const int variants = scores_mod || v->window || v->sinks != NULL || v->key_mask != NULL;

    /* Qᵀ = (Q[i0 : i0+span] · scale · log2(e))ᵀ of each head, or past |scale · log2(e)| = 1 Q times
     * its share and the scores times a power of two (fa_q_multiplier); columns rows..ncols are zero.
     * A narrow block keeps its rows row-major instead. */
    const float scale_log2 = p->scale * 1.4426950408889634f;
    const float q_mul = fa_q_multiplier(scale_log2), s_mul = fa_score_multiplier(scale_log2);
    for (int r = 0; r < (narrow ? rows : ncols); r++) {
        float row[FA_MAX_HEAD_DIM] = {0};
        if (r < rows)
            load_row(row, sv[r / span].q + (i0 + r % span) * p->q_row_stride * es, d, p->dtype, q_mul);
        for (int64_t c = 0; c < d; c++)
            if (narrow)
                t->q[r * dp + c] = row[c];
            else
                t->qt[c * BM + r] = row[c];
    }
    for (int c = 0; c < ncols; c++)
        t->m[c] = -INFINITY, t->l[c] = 0.0f;
    memset(t->o, 0, (size_t)mrows * dp * sizeof(float));

    /* The keys any row of the block may see: from the first row's range start to the last row's
     * range end (both move right with the row; every head has the same rows). */
    int64_t j_begin, j_end, unused;
    fa_key_range(v, p->causal, i0, delta, Nk, &j_begin, &unused);
    fa_key_range(v, p->causal, i0 + span - 1, delta, Nk, &unused, &j_end);
    for (int64_t j0 = j_begin; j0 < j_end; j0 += BN) {
        const int bn = (int)(j_end - j0 < BN ? j_end - j0 : BN);
        /* fp32 rows a whole number of vectors long are read in place by a narrow block. */
        const float *kb = t->k, *vb = t->v;
        int64_t ks = dp, vs = dp;
        if (in_place) {
            kb = (const float *)(sv->k + j0 * p->k_row_stride * es), ks = p->k_row_stride;
            vb = (const float *)(sv->v + j0 * p->v_row_stride * es), vs = p->v_row_stride;
        } else {
            for (int j = 0; j < bn; j++) {
                load_row(t->k + j * dp, sv->k + (j0 + j) * p->k_row_stride * es, d, p->dtype, 1.0f);
                load_row(t->v + j * dp, sv->v + (j0 + j) * p->v_row_stride * es, d, p->dtype, 1.0f);
            }
        }

        /* Sᵀ = K_j Q_iᵀ   (rows past bn are computed from stale K rows and never read) */
        if (narrow)
            scores_narrow(t->st, kb, ks, t->q, rows, bn, dp, dv);
        else
            gemm(t->st, BM, t->k, dp, 1, t->qt, BM, (bn + MR - 1) / MR * MR, ncols, d, NULL);
        scale_scores(t->st, bn, narrow ? rows : ncols, s_mul);

        if (scores_mod)
            apply_variants(p, v, sv, nh, span, ncols, t->st, NULL, i0, j0, bn);
        else if (variants)
            mask_keys(p, v, sv, nh, span, ncols, t->st, i0, j0, bn);
        else if (p->causal && j0 + bn - 1 > i0 + delta)
            /* Causal: query i0 + q does not see key j0 + k > i0 + q + delta. */
            for (int k = 0; k < bn; k++)
                for (int hp = 0; hp < nh; hp++)
                    for (int64_t q = 0; q < j0 + k - i0 - delta && q < span; q++)
                        t->st[k * BM + hp * span + q] = -INFINITY;

        if (narrow) {
            float alpha_r[MR];
            softmax_narrow(t->p, t->st, t->m, t->l, alpha_r, rows, bn);
            pv_narrow(t->o, t->p, vb, vs, alpha_r, rows, bn, dp, dv);
            continue;
        }

        /* m_new = max(m_i, rowmax(S)),  P = exp2(S − m_new),  l_i = l_i · exp2(m_i − m_new) + rowsum(P) */
        float alpha[BM] __attribute__((aligned(64)));
        if (wide_vectors())
            softmax_cols16(t->st, t->m, t->l, alpha, bn, ncols);
        else
            softmax_cols8(t->st, t->m, t->l, alpha, bn, ncols);

        /* O_i = O_i · exp2(m_i − m_new) + P V_j   (P read through Pᵀ's strides) */
        gemm(t->o, dp, t->st, 1, BM, t->v, dp, mrows, (int)dp, bn, alpha);
    }

    /* O = O_i / l_i,  lse = (m_i + log2 l_i) · ln 2; with variants, fa_row_end (sinks, rows that
     * see nothing). */
    for (int r = 0; r < rows; r++) {
        const seq_view *s_h = &sv[r / span];
        const int64_t i = i0 + r % span;
        float mul, lse2;
        if (variants) {
            const int has_sink = v->sinks != NULL;
            fa_row_end(t->m[r], t->l[r], has_sink, has_sink ? v->sinks[s_h->h] * FA_VARIANT_LOG2E : 0.0f, &mul,
                       &lse2);
        } else {
            const int sees_none = Nk == 0 || (p->causal && i + delta < 0);
            mul = sees_none ? 0.0f : 1.0f / t->l[r];
            lse2 = sees_none ? -INFINITY : t->m[r] + log2f(t->l[r]);
        }
        store_row(s_h->o + i * p->o_row_stride * es, t->o + r * dp, d, p->dtype, mul);
        if (s_h->lse != NULL)
            s_h->lse[i] = lse2 * 0.6931471805599453f;
    }
}

/* The block's sizes: ncols the S micro-kernel's width, mrows the P·V micro-kernel's rows. A full
 * block (a prefill's 64 rows of one head) passes them as constants, so that attend_rows' vector
 * loops over the block's columns unroll: with the sizes read at run time, prefill ran 25-30 %
 * slower on 2 cores (fp32, d = 64 and 128, 1k-4k keys). Up to MR columns run row by row
 * (scores_narrow, softmax_narrow, pv_narrow): on 2 cores 1.4-2.6x the tiles for 1-4 columns,
 * 0.99-1.13x for 8 at d >= 64; at d <= 32 from 8 columns the tiles are faster. */
FA_MULTIVERSION
static void attend_block(const fa_params *p, const fa_variants *v, const scratch *t, int64_t dp, const seq_view *sv,
                         int nh, int64_t i0)
{
    const int span = (int)(sv->nq - i0 < BM / nh ? sv->nq - i0 : BM / nh);
    const int rows = nh * span;
    if (rows == BM)
        attend_rows(p, v, t, dp, sv, nh, span, i0, BM, BM, 0);
    else
        attend_rows(p, v, t, dp, sv, nh, span, i0, (rows + NR - 1) / NR * NR, (rows + MR - 1) / MR * MR,
                    rows <= (dp >= 64 ? MR : MR / 2));
}

static int threads_for(const fa_params *p)
{
#ifdef _OPENMP
    /* At most 4 per processor: far past that, creating the team fails inside OpenMP. */
    const int cap = 4 * omp_get_num_procs();
    return p->num_threads <= 0 ? omp_get_max_threads() : p->num_threads < cap ? p->num_threads : cap;
#else
    (void)p;
    return 1;
#endif
}

/* Sequence b, head h of p. n_keys (NULL: p->Nk, or the varlen lengths) is a KV cache's per-batch
 * key count. */
static seq_view seq_of(const fa_params *p, const fa_variants *v, const int64_t *n_keys, int64_t b, int64_t h)
{
    const size_t es = dtype_size(p->dtype);
    const int64_t hk = h / (p->Hq / p->Hkv);          /* GQA: the kv head of query head h */
    seq_view sv;
    sv.b = b;
    sv.h = h;
    int64_t q_off, k_off, lse_off;
    if (v->cu_seqlens_q != NULL) {
        const int64_t q0 = v->cu_seqlens_q[b], k0 = v->cu_seqlens_k[b];
        sv.nq = v->cu_seqlens_q[b + 1] - q0;
        sv.nk = v->cu_seqlens_k[b + 1] - k0;
        q_off = q0 * p->q_row_stride;
        k_off = k0;                                    /* rows; k and v strides differ */
        lse_off = h * v->total_q + q0;
        sv.q = (const char *)p->q + (q_off + h * p->q_head_stride) * es;
        sv.o = (char *)p->o + (q0 * p->o_row_stride + h * p->o_head_stride) * es;
        sv.k = sv.nk > 0 ? (const char *)p->k + (k_off * p->k_row_stride + hk * p->k_head_stride) * es : NULL;
        sv.v = sv.nk > 0 ? (const char *)p->v + (k_off * p->v_row_stride + hk * p->v_head_stride) * es : NULL;
    } else {
        sv.nq = p->Nq;
        sv.nk = n_keys != NULL ? n_keys[b] : p->Nk;
        lse_off = (b * p->Hq + h) * p->Nq;
        sv.q = (const char *)p->q + (b * p->q_batch_stride + h * p->q_head_stride) * es;
        sv.o = (char *)p->o + (b * p->o_batch_stride + h * p->o_head_stride) * es;
        /* k, v may be NULL when there are no keys at all. */
        sv.k = p->Nk > 0 ? (const char *)p->k + (b * p->k_batch_stride + hk * p->k_head_stride) * es : NULL;
        sv.v = p->Nk > 0 ? (const char *)p->v + (b * p->v_batch_stride + hk * p->v_head_stride) * es : NULL;
    }
    sv.lse = p->lse != NULL ? p->lse + lse_off : NULL;
    sv.delta = fa_delta(v, sv.nq, sv.nk);
    return sv;
}

/* Runs attend_block over every (sequence, group of query heads, query block) in parallel. A group
 * is the query heads of one kv head whose rows fit one block together (GQA with a few queries,
 * a decoding step); with Nq > BM / 2 it is one head. Groups shrink while there are fewer work
 * items than threads. */
static int run_blocks(const fa_params *p, const fa_variants *v, const int64_t *n_keys)
{
    const int64_t dp = (p->d + NR - 1) / NR * NR;     /* d padded for the micro-kernel */
    const int64_t n_qblocks = (p->Nq + BM - 1) / BM;
    const int64_t G = p->Hq / p->Hkv, threads = threads_for(p);
    int64_t nh = p->Nq <= BM ? BM / p->Nq : 1;
    nh = nh < G ? nh : G;
    while (nh > 1 && p->B * p->Hkv * ((G + nh - 1) / nh) < threads)
        nh = (nh + 1) / 2;
    const int64_t n_groups = (G + nh - 1) / nh;        /* per kv head */
    const int64_t n_items = p->B * p->Hkv * n_groups * n_qblocks;
    int failed = 0;

    /* No more threads than work items: each thread allocates and zeroes its tiles. */
#pragma omp parallel num_threads((int)(n_items < threads ? n_items : threads))
    {
        scratch t;
        const int ok = scratch_alloc(&t, dp);
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
        /* Causal blocks further down carry more keys: hand those out first. */
#pragma omp for schedule(dynamic, 1)
        for (int64_t w = 0; w < n_items; w++) {
            if (!ok)
                continue;
            const int64_t qb = n_qblocks - 1 - w % n_qblocks;
            const int64_t rest = w / n_qblocks, group = rest % n_groups, bk = rest / n_groups;
            const int64_t b = bk / p->Hkv, h0 = bk % p->Hkv * G + group * nh;
            const int heads = (int)(G - group * nh < nh ? G - group * nh : nh);
            seq_view sv[BM];
            for (int hp = 0; hp < heads; hp++)
                sv[hp] = seq_of(p, v, n_keys, b, h0 + hp);
            if (qb * BM < sv[0].nq)                   /* a packed sequence shorter than Nq */
                attend_block(p, v, &t, dp, sv, heads, qb * BM);
        }
        if (ok)
            free(t.base);
    }
    return failed ? FA_ERR_OUT_OF_MEMORY : FA_OK;
}

/* The ALiBi slopes and sinks, host memory here: one past FA_MAX_SCALE leaves a float once times
 * log2 e (NaN rows). A sink of −inf is no sink. */
static int check_host_variants(const fa_params *p, const fa_variants *v)
{
    const int64_t slope_rows = v->alibi_batch_stride > 0 ? p->B : 1;
    for (int64_t b = 0; v->alibi_slopes != NULL && b < slope_rows; b++)
        for (int64_t h = 0; h < p->Hq; h++)
            if (fabsf(v->alibi_slopes[b * v->alibi_batch_stride + h]) > FA_MAX_SCALE)
                return FA_ERR_VARIANT;
    for (int64_t h = 0; v->sinks != NULL && h < p->Hq; h++)
        if (fabsf(v->sinks[h]) > FA_MAX_SCALE && v->sinks[h] != -INFINITY)
            return FA_ERR_VARIANT;
    return FA_OK;
}

int fa_forward_variants_cpu(const fa_params *p_in, const fa_variants *v_in)
{
    static const fa_variants none;
    const fa_variants *v = v_in != NULL ? v_in : &none;
    int status = fa_check_variants(p_in, v);
    if (status == FA_OK)
        status = check_host_variants(p_in, v);
    if (status != FA_OK)
        return status;
    fa_params tight = *p_in;                    /* packed: Nq and Nk the longest sequence's */
    const fa_params *p = &tight;
    if (v->cu_seqlens_q != NULL
        && ((status = fa_check_cu_seqlens(v->cu_seqlens_q, p->B, &tight.Nq, v->total_q)) != FA_OK
            || (status = fa_check_cu_seqlens(v->cu_seqlens_k, p->B, &tight.Nk, v->total_k)) != FA_OK))
        return status;
    if (p->B == 0 || p->Hq == 0 || p->Nq == 0)
        return FA_OK;
    return run_blocks(p, v, NULL);
}

int fa_forward_cpu(const fa_params *p)
{
    return fa_forward_variants_cpu(p, NULL);
}

int fa_forward_kvcache_variants_cpu(const fa_kvcache_params *kp, const fa_variants *v_in)
{
    int status = fa_check_kvcache_params(kp);
    if (status != FA_OK)
        return status;
    fa_variants v;                              /* bottom-right; no packing, no masks */
    if ((status = fa_kvcache_variants(kp, v_in, &v)) != FA_OK
        || (status = check_host_variants(&kp->p, &v)) != FA_OK)
        return status;
    const fa_params *p = &kp->p;
    if (p->B == 0)
        return FA_OK;
    const int64_t nnew = kp->k_new != NULL ? kp->Nnew : 0;

    /* Every check before any write: start[b] + Nnew must fit the cache. */
    int64_t *n_keys = (int64_t *)malloc(sizeof(int64_t) * p->B);
    if (n_keys == NULL)
        return FA_ERR_OUT_OF_MEMORY;
    for (int64_t b = 0; b < p->B; b++) {
        const int64_t start = kp->cache_seqlens != NULL ? kp->cache_seqlens[b] : p->Nk - nnew;
        if (start < 0 || nnew > p->Nk - start) {
            free(n_keys);
            return FA_ERR_SEQLEN;
        }
        n_keys[b] = start + nnew;
    }

    /* Append: cache[b, h, start + j] = new[b, h, j] for j < Nnew. */
    const size_t es = dtype_size(p->dtype), row_bytes = (size_t)p->d * es;
#pragma omp parallel for collapse(2) num_threads(threads_for(p))
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t h = 0; h < p->Hkv; h++)
            for (int64_t j = 0; j < nnew; j++) {
                const int64_t row = n_keys[b] - nnew + j;
                memcpy((char *)p->k + (b * p->k_batch_stride + h * p->k_head_stride + row * p->k_row_stride) * es,
                       (const char *)kp->k_new +
                           (b * kp->kn_batch_stride + h * kp->kn_head_stride + j * kp->kn_row_stride) * es,
                       row_bytes);
                memcpy((char *)p->v + (b * p->v_batch_stride + h * p->v_head_stride + row * p->v_row_stride) * es,
                       (const char *)kp->v_new +
                           (b * kp->vn_batch_stride + h * kp->vn_head_stride + j * kp->vn_row_stride) * es,
                       row_bytes);
            }

    status = p->Hq == 0 || p->Nq == 0 ? FA_OK : run_blocks(p, &v, n_keys);
    free(n_keys);
    return status;
}

int fa_forward_kvcache_cpu(const fa_kvcache_params *kp)
{
    return fa_forward_kvcache_variants_cpu(kp, NULL);
}

/* ------------------------------------------------------------------------ */
/* The backward pass.                                                         */

/* One thread's backward tiles, fp32, in one 64-byte aligned allocation. For one (sequence, kv head):
 * K, V and the dK, dV accumulators of its keys (kr rows: padded to a whole number of BN, plus MR for
 * the micro-kernel's last row block); for one block of BM query rows of one head: Q and dO as rows and
 * as columns (Qᵀ · scale · log2 e, dOᵀ), dQ, and over the block's key range Sᵀ (then Pᵀ), dPᵀ (then
 * dSᵀ) and the softcap's tanh, keys × queries as in the forward (sr rows: the widest range a block
 * can have, whole MR blocks). */
typedef struct {
    float *k, *v, *dk, *dv;    /* (kr, dp) */
    float *q, *dout, *dq;      /* (BM, dp) */
    float *qt, *dot;           /* (dp, BM) */
    float *st, *dpt, *tt;      /* (kr, BM) */
    float *ones;               /* (BM) ones: the micro-kernel's c_scale that accumulates */
    void *base;
} bwd_scratch;

static int bwd_scratch_alloc(bwd_scratch *t, int64_t dp, int64_t kr, int64_t sr)
{
    const size_t n_kv = (size_t)(kr * dp), n_q = (size_t)(BM * dp), n_s = (size_t)(sr * BM);
    float *f = zeroed_floats(4 * n_kv + 5 * n_q + 3 * n_s + BM);   /* padding columns stay zero from here on */
    if (f == NULL)
        return 0;
    t->base = f;
    t->k = f;    f += n_kv;
    t->v = f;    f += n_kv;
    t->dk = f;   f += n_kv;
    t->dv = f;   f += n_kv;
    t->q = f;    f += n_q;
    t->dout = f; f += n_q;
    t->dq = f;   f += n_q;
    t->qt = f;   f += n_q;
    t->dot = f;  f += n_q;
    t->st = f;   f += n_s;
    t->dpt = f;  f += n_s;
    t->tt = f;   f += n_s;
    t->ones = f;
    for (int i = 0; i < BM; i++)
        t->ones[i] = 1.0f;
    return 1;
}

/* Query rows [i0, i0 + bm) of head h (sequence sv, rows q0.. of the packed tensors): FlashAttention-2's
 * backward over the block's key range, every product through the forward's micro-kernel:
 *
 *     Sᵀ = K Qᵀ (log2 units, the variants applied),  Pᵀ = exp2(Sᵀ − lse₂)
 *     dPᵀ = V dOᵀ,  D = Σ_j P dP − dlse,  dSᵀ = Pᵀ ∘ (dPᵀ − D) ∘ (1 − tanh²) · scale
 *     dV += Pᵀ dO,  dK += dSᵀ Q,  dQ = dS K
 *
 * lse₂ is the row's log-sum-exp from these scores when they are all of its keys (no delta given):
 * the forward's value without its rounding, so P sums to 1 against its own scores (the forward's
 * few ulps of lse times dP would otherwise reach dS). */
FA_MULTIVERSION
static void backward_block(const fa_backward_params *bp, const fa_variants *v, const bwd_scratch *t, int64_t dp,
                           const seq_view *sv, int64_t q0, int64_t i0, double *dsinks)
{
    const fa_params *p = &bp->p;
    const int64_t d = p->d, h = sv->h, b = sv->b, packed = v->cu_seqlens_q != NULL;
    const int bm = (int)(sv->nq - i0 < BM ? sv->nq - i0 : BM);
    const size_t es = dtype_size(p->dtype);
    const float scale_log2 = p->scale * 1.4426950408889634f, c2 = v->softcap * FA_VARIANT_LOG2E;
    const float q_mul = fa_q_multiplier(scale_log2), s_mul = fa_score_multiplier(scale_log2);
    const int has_sink = v->sinks != NULL;
    const float sink2 = has_sink ? v->sinks[h] * FA_VARIANT_LOG2E : -INFINITY;
    const int scores_mod = v->softcap != 0.0f || v->alibi_slopes != NULL || v->mask != NULL;

    /* Q, dO as rows and as columns; rows past bm are zero. lse₂ and dlse of the rows. */
    float lse2[BM] __attribute__((aligned(64))), dlse[BM], given[BM];
    for (int r = 0; r < BM; r++) {
        float *qr = t->q + r * dp, *gr = t->dout + r * dp;
        lse2[r] = INFINITY, dlse[r] = 0.0f, given[r] = 0.0f;
        if (r < bm) {
            const int64_t qi = q0 + i0 + r;
            const int64_t row = packed ? h * v->total_q + qi : (b * p->Hq + h) * p->Nq + i0 + r;
            load_row(qr, (const char *)p->q + (b * p->q_batch_stride + h * p->q_head_stride + qi * p->q_row_stride) * es,
                     d, p->dtype, 1.0f);
            load_row(gr, (const char *)bp->dout + (b * bp->do_batch_stride + h * bp->do_head_stride
                                                   + qi * bp->do_row_stride) * es, d, p->dtype, 1.0f);
            const float lse = p->lse[row];
            lse2[r] = lse == -INFINITY ? INFINITY : lse * 1.4426950408889634f;   /* +inf: P = 0 */
            dlse[r] = bp->dlse != NULL ? bp->dlse[row] : 0.0f;
            given[r] = bp->delta != NULL ? bp->delta[row] : 0.0f;
        } else {
            memset(qr, 0, sizeof(float) * (size_t)d);
            memset(gr, 0, sizeof(float) * (size_t)d);
        }
        for (int64_t c = 0; c < d; c++) {
            t->qt[c * BM + r] = qr[c] * q_mul;
            t->dot[c * BM + r] = gr[c];
        }
    }

    /* The keys any row of the block may see (as attend_block), in blocks of BN. */
    int64_t j_begin, j_end, unused;
    fa_key_range(v, p->causal, i0, sv->delta, sv->nk, &j_begin, &unused);
    fa_key_range(v, p->causal, i0 + bm - 1, sv->delta, sv->nk, &unused, &j_end);
    const int64_t nb = j_end > j_begin ? j_end - j_begin : 0, nb8 = (nb + MR - 1) / MR * MR;
    for (int64_t j0 = j_begin; j0 < j_end; j0 += BN) {
        const int bn = (int)(j_end - j0 < BN ? j_end - j0 : BN), bn8 = (bn + MR - 1) / MR * MR;
        float *st = t->st + (j0 - j_begin) * BM, *dpt = t->dpt + (j0 - j_begin) * BM;
        gemm(st, BM, t->k + j0 * dp, dp, 1, t->qt, BM, bn8, BM, d, NULL);      /* Sᵀ = K Qᵀ */
        scale_scores(st, bn8, BM, s_mul);
        gemm(dpt, BM, t->v + j0 * dp, dp, 1, t->dot, BM, bn8, BM, d, NULL);    /* dPᵀ = V dOᵀ */
        if (c2 > 0.0f)
            tanh_scaled(t->tt + (j0 - j_begin) * BM, st, (int64_t)bn * BM, 1.0f / c2);
        if (scores_mod)
            apply_variants(p, v, sv, 1, bm, bm, st, c2 > 0.0f ? t->tt + (j0 - j_begin) * BM : NULL, i0, j0, bn);
        else                                    /* visibility alone: whole key rows, crossed blocks */
            mask_keys(p, v, sv, 1, bm, bm, st, i0, j0, bn);
    }
    for (int64_t x = nb * BM; x < nb8 * BM; x++)    /* the micro-kernel's rows past the range */
        t->st[x] = -INFINITY, t->dpt[x] = 0.0f;

    /* P = 2^(s − shift) · mul. With a given delta (a ring step) shift = lse₂ and mul = 1. Else from
     * the scores (and the sink), all of the row's keys: each query's max m and l = Σ_j 2^(s − m), the
     * terms in fp32 (exp2_neg), their sum in double, across queries in whole vectors as in the
     * forward; shift = m and mul = 1 / l, rather than the forward's lse₂ = m + log2 l, which loses
     * log2 l where |m| is huge (a float mask of −3.4e38 on a whole row). */
    float shift[BM] __attribute__((aligned(64))), mul[BM] __attribute__((aligned(64)));
    for (int r = 0; r < BM; r++)
        shift[r] = lse2[r], mul[r] = 1.0f;
    if (bp->delta == NULL) {
        float mf[BM];                                  /* 0 where a row has no key and no sink: skipped below */
        double lf[BM];
        if (wide_vectors())
            max_sum_cols16(mf, lf, t->st, nb, sink2);
        else
            max_sum_cols8(mf, lf, t->st, nb, sink2);
        for (int r = 0; r < bm; r++) {
            const double l = lf[r] + (has_sink ? exp2((double)sink2 - mf[r]) : 0.0);
            if (lse2[r] != INFINITY && l > 0.0)        /* else the row sees nothing */
                shift[r] = mf[r], mul[r] = (float)(1.0 / l);
        }
    }

    /* Pᵀ = exp2(Sᵀ − shift) · mul; D = Σ_j P dP (or the given delta) − dlse. */
    float dsum[BM], dd[BM] __attribute__((aligned(64)));     /* dd: read as vectors (dscores_cols) */
    if (wide_vectors())
        probs_cols16(t->st, t->dpt, shift, mul, dsum, nb8);
    else
        probs_cols8(t->st, t->dpt, shift, mul, dsum, nb8);
    for (int r = 0; r < BM; r++) {
        dd[r] = (bp->delta != NULL ? given[r] : dsum[r]) - dlse[r];
        if (has_sink && dsinks != NULL && r < bm && shift[r] != INFINITY)
            dsinks[h] -= exp2((double)sink2 - shift[r]) * mul[r] * dd[r];
    }

    /* dV += Pᵀ dO, per key block (rows past the range have P = 0). */
    for (int64_t j0 = j_begin; j0 < j_end; j0 += BN) {
        const int bn = (int)(j_end - j0 < BN ? j_end - j0 : BN), bn8 = (bn + MR - 1) / MR * MR;
        gemm(t->dv + j0 * dp, dp, t->st + (j0 - j_begin) * BM, BM, 1, t->dout, dp, bn8, (int)dp, BM, t->ones);
    }

    /* dSᵀ = Pᵀ ∘ (dPᵀ − D) ∘ (1 − tanh²) · scale, into dPᵀ. */
    const float *tanh_s = c2 > 0.0f ? t->tt : NULL;
    if (wide_vectors())
        dscores_cols16(t->dpt, t->st, tanh_s, dd, p->scale, nb, nb8);
    else
        dscores_cols8(t->dpt, t->st, tanh_s, dd, p->scale, nb, nb8);

    /* dK += dSᵀ Q per key block; dQ = dS K over the whole range (dS read through dSᵀ's strides). */
    for (int64_t j0 = j_begin; j0 < j_end; j0 += BN) {
        const int bn = (int)(j_end - j0 < BN ? j_end - j0 : BN), bn8 = (bn + MR - 1) / MR * MR;
        gemm(t->dk + j0 * dp, dp, t->dpt + (j0 - j_begin) * BM, BM, 1, t->q, dp, bn8, (int)dp, BM, t->ones);
    }
    if (nb > 0)
        gemm(t->dq, dp, t->dpt, 1, BM, t->k + j_begin * dp, dp, BM, (int)dp, nb, NULL);
    else
        memset(t->dq, 0, sizeof(float) * (size_t)(BM * dp));
    for (int r = 0; r < bm; r++)
        store_row((char *)bp->dq + (b * bp->dq_batch_stride + h * bp->dq_head_stride + (q0 + i0 + r) * bp->dq_row_stride) * es,
                  t->dq + r * dp, d, p->dtype, 1.0f);
}

/* One (batch or sequence, kv head): K and V converted once, the query heads of its group and their
 * query blocks one after another (backward_block), dK and dV summed over all of them in fp32. */
static void backward_kv_head(const fa_backward_params *bp, const fa_variants *v, const bwd_scratch *t, int64_t dp,
                             int64_t b, int64_t hk, double *dsinks)
{
    const fa_params *p = &bp->p;
    const int64_t G = p->Hq / p->Hkv, q0 = v->cu_seqlens_q != NULL ? v->cu_seqlens_q[b] : 0;
    const seq_view first = seq_of(p, v, NULL, b, hk * G);
    const int64_t nk = first.nk, kr = (nk + BN - 1) / BN * BN + MR;
    const size_t es = dtype_size(p->dtype);
    for (int64_t j = 0; j < kr; j++) {
        float *kj = t->k + j * dp, *vj = t->v + j * dp;
        if (j < nk) {
            load_row(kj, first.k + j * p->k_row_stride * es, p->d, p->dtype, 1.0f);
            load_row(vj, first.v + j * p->v_row_stride * es, p->d, p->dtype, 1.0f);
        } else {
            memset(kj, 0, sizeof(float) * (size_t)p->d);
            memset(vj, 0, sizeof(float) * (size_t)p->d);
        }
    }
    memset(t->dk, 0, sizeof(float) * (size_t)(kr * dp));
    memset(t->dv, 0, sizeof(float) * (size_t)(kr * dp));
    for (int64_t h = hk * G; h < (hk + 1) * G; h++) {
        const seq_view sv = seq_of(p, v, NULL, b, h);
        for (int64_t i0 = 0; i0 < sv.nq; i0 += BM)
            backward_block(bp, v, t, dp, &sv, q0, i0, dsinks);
    }
    const int64_t k0 = v->cu_seqlens_k != NULL ? v->cu_seqlens_k[b] : 0;
    for (int64_t j = 0; j < nk; j++) {
        store_row((char *)bp->dk + (b * bp->dk_batch_stride + hk * bp->dk_head_stride + (k0 + j) * bp->dk_row_stride) * es,
                  t->dk + j * dp, p->d, p->dtype, 1.0f);
        store_row((char *)bp->dv + (b * bp->dv_batch_stride + hk * bp->dv_head_stride + (k0 + j) * bp->dv_row_stride) * es,
                  t->dv + j * dp, p->d, p->dtype, 1.0f);
    }
}

int fa_backward_cpu(const fa_backward_params *bp_in, const fa_variants *v_in)
{
    static const fa_variants none;
    const fa_variants *v = v_in != NULL ? v_in : &none;
    if (bp_in == NULL)
        return FA_ERR_NULL_POINTER;
    int status = fa_check_backward(bp_in, v);
    if (status == FA_OK)
        status = check_host_variants(&bp_in->p, v);
    if (status != FA_OK)
        return status;
    fa_backward_params tight = *bp_in;          /* packed: Nq and Nk the longest sequence's */
    const fa_backward_params *bp = &tight;
    const fa_params *p = &bp->p;
    if (v->cu_seqlens_q != NULL
        && ((status = fa_check_cu_seqlens(v->cu_seqlens_q, p->B, &tight.p.Nq, v->total_q)) != FA_OK
            || (status = fa_check_cu_seqlens(v->cu_seqlens_k, p->B, &tight.p.Nk, v->total_k)) != FA_OK))
        return status;
    if (fa_backward_is_empty(&bp_in->p))       /* the caller's sizes: whether dK and dV are written */
        return FA_OK;
    if (p->Hq == 0 || p->Nq == 0) {             /* no query: dK = dV = 0 and dsinks = 0, q, k, v unread */
        const int packed = v->cu_seqlens_q != NULL;
        const int64_t nb = packed ? 1 : p->B, nk = packed ? v->total_k : p->Nk;
        const size_t es = dtype_size(p->dtype);
        for (int64_t b = 0; b < nb; b++)
            for (int64_t h = 0; h < p->Hkv; h++)
                for (int64_t j = 0; j < nk; j++) {
                    memset((char *)bp->dk + (b * bp->dk_batch_stride + h * bp->dk_head_stride + j * bp->dk_row_stride) * es,
                           0, (size_t)p->d * es);
                    memset((char *)bp->dv + (b * bp->dv_batch_stride + h * bp->dv_head_stride + j * bp->dv_row_stride) * es,
                           0, (size_t)p->d * es);
                }
        if (v->sinks != NULL && bp->dsinks != NULL)
            for (int64_t h = 0; h < p->Hq; h++)
                bp->dsinks[h] = 0.0f;
        return FA_OK;
    }
    /* The sinks' gradient per (batch, query head), summed over the batch in order afterwards: the
     * same bits whatever the threads. */
    const int with_sinks = v->sinks != NULL && bp->dsinks != NULL;
    double *dsinks = with_sinks ? (double *)calloc((size_t)(p->B * p->Hq > 0 ? p->B * p->Hq : 1), sizeof(double)) : NULL;
    if (with_sinks && dsinks == NULL)
        return FA_ERR_OUT_OF_MEMORY;
    int failed = 0;
    const int64_t items = p->B * p->Hkv, dp = (p->d + NR - 1) / NR * NR;
    const int64_t kr = (p->Nk + BN - 1) / BN * BN + MR;   /* key rows: the longest sequence's, padded */
    /* A block's key range: at most BM + left + right keys under a window bounded on both sides. */
    const int64_t left = v->window ? v->window_left : -1, right = p->causal ? 0 : v->window ? v->window_right : -1;
    int64_t sr = kr;
    if (left >= 0 && right >= 0 && left < kr && right < kr && BM + left + right < kr)
        sr = (BM + left + right + MR - 1) / MR * MR;
#pragma omp parallel num_threads(threads_for(p))
    {
        bwd_scratch t;
        const int ok = bwd_scratch_alloc(&t, dp, kr, sr);
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t w = 0; w < items; w++)
            if (ok)
                backward_kv_head(bp, v, &t, dp, w / p->Hkv, w % p->Hkv,
                                 with_sinks ? dsinks + w / p->Hkv * p->Hq : NULL);
        if (ok)
            free(t.base);
    }
    if (with_sinks && !failed)
        for (int64_t h = 0; h < p->Hq; h++) {
            double sum = 0.0;
            for (int64_t b = 0; b < p->B; b++)
                sum += dsinks[b * p->Hq + h];
            bp->dsinks[h] = (float)sum;
        }
    free(dsinks);
    return failed ? FA_ERR_OUT_OF_MEMORY : FA_OK;
}

