/*
 * fa_variant.h — the variants' semantics (fa.h, fa_variants) as small functions every backend
 * shares: the C backend includes it as plain C, the CUDA kernels as __host__ __device__ code.
 * Scores here are in log2 units (s · log2 e), as the kernels keep them, so each variant's constant
 * is scaled by log2 e once.
 */
#ifndef FA_VARIANT_H
#define FA_VARIANT_H

#include <math.h>
#include <stdint.h>

#include "fa.h"

#ifdef __CUDACC__
#define FA_VARIANT_FN __host__ __device__ __forceinline__
#else
#define FA_VARIANT_FN static inline
#endif

#define FA_VARIANT_LOG2E 1.4426950408889634f

/* c = scale · log2 e split between Q and the scores: Q is loaded times c where |c| ≤ 1 (every
 * default scale from d = 3), which cannot overflow. Past it the scores take the power of two 2^e
 * with c / 2^e in [0.5, 1) on Q: q · c past a float (|q| > 1.02 at scale 2.3e38) would make small
 * scores inf or NaN, and multiplying a score by a power of two is exact, so each score rounds as
 * one with |c| ≤ 1 does. With c whole on the scores, each rounded again at its own size, the C
 * backend's fp32 at scale 2 erred 3.6× and 6× PyTorch's (whose products at scale 2 are exact) at
 * d = 120 and 210 (tests/test_random.py, test_fp32_rounding_cases). From |c| = 2^127 (no float
 * 2^128) the scores take c whole. The scores come out in log2 units either way. */
FA_VARIANT_FN float fa_score_multiplier(float c)
{
    if (!(fabsf(c) > 1.0f))
        return 1.0f;
    if (!(fabsf(c) < 0x1p127f))
        return c;
    int e;
    frexpf(c, &e);                                      /* c = f · 2^e, |f| in [0.5, 1) */
    return ldexpf(1.0f, e);
}

FA_VARIANT_FN float fa_q_multiplier(float c)
{
    return c / fa_score_multiplier(c);                  /* exact */
}

/* δ of a sequence of nq queries over nk keys: where its causal and window diagonals sit. */
FA_VARIANT_FN int64_t fa_delta(const fa_variants *v, int64_t nq, int64_t nk)
{
    return v->align == FA_ALIGN_BOTTOM_RIGHT ? nk - nq : 0;
}

/* The keys [lo, hi) that causal and the window let query i see (before key_mask and a bool mask),
 * clamped to 0..nk; hi <= lo when none. */
FA_VARIANT_FN void fa_key_range(const fa_variants *v, int causal, int64_t i, int64_t delta, int64_t nk, int64_t *lo,
                                int64_t *hi)
{
    /* A side wider than far reaches every key: clamped there, so that i + δ ± side cannot overflow
     * (sizes are at most FA_MAX_SIZE). */
    const int64_t far = i + (delta < 0 ? -delta : delta) + nk + 1;
    int64_t left = v->window ? v->window_left : -1;
    int64_t right = causal ? 0 : v->window ? v->window_right : -1;
    left = left > far ? far : left;
    right = right > far ? far : right;
    int64_t a = left >= 0 ? i + delta - left : 0, e = right >= 0 ? i + delta + right + 1 : nk;
    *lo = a < 0 ? 0 : a > nk ? nk : a;
    *hi = e < 0 ? 0 : e > nk ? nk : e;
}

/* The ALiBi slope of (b, h) in log2 units; 0 without ALiBi. */
FA_VARIANT_FN float fa_alibi_slope2(const fa_variants *v, int64_t b, int64_t h)
{
    return v->alibi_slopes != NULL ? v->alibi_slopes[b * v->alibi_batch_stride + h] * FA_VARIANT_LOG2E : 0.0f;
}

/* A float attn_mask value in log2 units. Finite values past ±FA_VARIANT_MASK_LIMIT are clamped
 * there first, so that the product stays finite: torch.finfo(float32).min, a common padding mask,
 * would become −inf and hide a key that SDPA, adding it to the score, keeps (a row masked so
 * everywhere averages v there rather than giving 0). ±inf and NaN pass as they are. */
#define FA_VARIANT_MASK_LIMIT 2.3e38f
FA_VARIANT_FN float fa_mask_log2(float m)
{
    if (m < -FA_VARIANT_MASK_LIMIT && m != -INFINITY)
        m = -FA_VARIANT_MASK_LIMIT;
    else if (m > FA_VARIANT_MASK_LIMIT && m != INFINITY)
        m = FA_VARIANT_MASK_LIMIT;
    return m * FA_VARIANT_LOG2E;
}

/* A row's end with a sink (log2 units s2 = sinks[h] · log2 e): from the row's max m and sum l
 * (l = Σ 2^(s − m)), the factor that turns its accumulated O into the output, and its lse in log2
 * units. Without a sink (has_sink 0) this is 1 / l and m + log2 l; a row with no visible key
 * (l = 0) gets 0 and −inf, or 0 and s2 with a sink. */
FA_VARIANT_FN void fa_row_end(float m, float l, int has_sink, float s2, float *o_mul, float *lse2)
{
    const int none = l == 0.0f;                      /* NaN scores keep l NaN: the row stays NaN */
    if (has_sink) {
        const float M = !none && m > s2 ? m : s2;
        /* A sink of −inf adds nothing (and with no key M = −inf: exp2(−inf − −inf) would be NaN). */
        const float lt = (none ? 0.0f : l * exp2f(m - M)) + (s2 == -INFINITY ? 0.0f : exp2f(s2 - M));
        *o_mul = none ? 0.0f : exp2f(m - M) / lt;
        *lse2 = M + log2f(lt);
    } else {
        *o_mul = none ? 0.0f : 1.0f / l;
        *lse2 = none ? -INFINITY : m + log2f(l);
    }
}

#endif /* FA_VARIANT_H */
