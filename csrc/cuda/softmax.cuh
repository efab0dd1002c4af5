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

/* The plain Hopper and sm_80 kernels take P = exp2(fma(s, c, −fl(m · c))), so a row's max key gets
 * exp2(res), res = m · c − fl(m · c), up to ulp(m · c) / 2: below |m · c| = 2^20 (natural scores of
 * 7.3e5) res is within 2^−5 and P ≤ 1.022, as far from fp16's and fp32's ranges as on ordinary
 * calls, and block-to-block weights are off by at most ulp(m · c), the order of the fp32 score's
 * own rounding. Past it res grows to fp16's range (P·V packs P: inf or 0 rows from 2^29) and then
 * fp32's (2^31). From it each exponent is taken relative to m · c itself:
 * exp2(fma(s, c, −fl(m · c)) − res), res exactly one fma (fa_exp_residue), the max key's
 * exponent exactly 0, every block's P relative to the same m · c; the test is warp-uniform, so
 * ordinary calls keep the one-fma exponentials. */
#define FA_EXACT_EXP_FROM 0x1p20f

/* res = m · c − mc with mc = fl(m · c), exact (a product's rounding error fits a float), where
 * |mc| ≥ FA_EXACT_EXP_FROM; 0 below it (also for m = −inf, mc = 0: a row that saw no key yet). */
__device__ __forceinline__ float fa_exp_residue(float m, float c, float mc)
{
    return fabsf(mc) >= FA_EXACT_EXP_FROM ? fmaf(m, c, -mc) : 0.f;
}

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
