/*
 * softmax.cuh — the online softmax's units and finalize steps, shared by every CUDA kernel. Scores
 * are kept in log2 units (s · log2 e), so each exponential is one exp2 (MUFU.EX2); a row's lse
 * leaves in natural log. The running update itself (m_new = max(m, rowmax(S)), l and O rescaled by
 * exp2(m − m_new)) stays in each kernel, where its register layout lives.
 */
#ifndef FA_SOFTMAX_CUH
#define FA_SOFTMAX_CUH

#include <math.h>

#include "fa_variant.h"                /* fa_q_multiplier: where scale · log2(e) goes, Q or S */

#define FA_LOG2E 1.4426950408889634f   /* scale · log2(e): scores in exp2 units */
#define FA_LN2 0.69314718055994531f    /* log2 units → natural log */

/* lse = ln Σ_j exp(scale · q · k_j) from a row's max m2 and sum l = Σ_j 2^(s_j − m2), s_j and m2 in
 * log2 units. */
__device__ __forceinline__ float fa_lse(float m2, float l)
{
    return (m2 + log2f(l)) * FA_LN2;
}

/* A split-KV row's lse after its splits merged (max M, weight sum l): −inf when no split saw a key
 * (l = 0), NaN when cache_seqlens was out of range or a split's lse was NaN (valid false). */
__device__ __forceinline__ float fa_split_lse(float M, float l, bool valid)
{
    return valid ? (l == 0.f ? -INFINITY : fa_lse(M, l)) : NAN;
}

#endif /* FA_SOFTMAX_CUH */
