/*
 * fa_lanes.h — the C backend's lane-wise helpers on one vector type: a select, the max, 2^x and tanh;
 * the micro-kernel (gemm in fa_cpu.c); and the softmax steps that run across a block's queries on
 * Sᵀ, the forward's and the backward's. fa_cpu.c includes it twice, with V, I, D and LANES naming
 * 16-float vectors (v16f, v16i, v8d: the AVX-512 registers) and 8-float ones (v8f, v8i, v4d: AVX2's;
 * LANE_LO and LANE_HI pick a vector's halves), and calls the 8-lane forms where the machine has no
 * 512-bit unit: GCC 12 turns the 16-lane comparisons, integer operations and broadcasts into code lane
 * by lane there, and keeps arrays of 16-float vectors in memory. Both forms compute every lane alike,
 * bit for bit, as long as the compiler makes each a · b + c one FMA at both widths (setup.py's
 * --param=avoid-fma-max-bits=0). The names it was given are undefined at its end.
 */
#define LANE_NAME2(name, n) name##n
#define LANE_NAME1(name, n) LANE_NAME2(name, n)
#define LANE(name) LANE_NAME1(name, LANES)

static FA_INLINE V LANE(vselect)(I mask, V a, V b) { return (V)(((I)a & mask) | ((I)b & ~mask)); }
static FA_INLINE V LANE(vmax)(V a, V b) { return LANE(vselect)(a > b, a, b); }

/* m where it is a number, 0 where it is −inf (the reference of a row that has seen only −inf). */
static FA_INLINE V LANE(vref)(V m) { return LANE(vselect)(m == -INFINITY, (V){0}, m); }

/* 2^x for x <= 0, to ~1 ulp: x = n + f with n an integer and |f| <= 1/2;
 * 2^f from its Taylor series to degree 7 (truncation error < 5e-9), 2^n put
 * straight into the exponent bits. x below −126 (and −inf) gives 0; NaN stays
 * NaN, so a NaN score poisons its row as it does in SDPA. */
static FA_INLINE V LANE(exp2_neg)(V x)
{
    const I tiny = x < -126.0f;
    const V xc = LANE(vselect)(tiny, (V){0} - 126.0f, x);
    const V xn = LANE(vselect)(xc == xc, xc, (V){0});              /* n from a number, never NaN */
    const I n = __builtin_convertvector(xn - 0.5f, I);              /* truncation = nearest, as x <= 0 */
    const V y = (xc - __builtin_convertvector(n, V)) * 0.6931471805599453f;
    V t = y * (1.0f / 5040.0f) + 1.0f / 720.0f;
    t = t * y + 1.0f / 120.0f;
    t = t * y + 1.0f / 24.0f;
    t = t * y + 1.0f / 6.0f;
    t = t * y + 0.5f;
    t = t * y + 1.0f;
    t = t * y + 1.0f;                                               /* e^y = 2^f */
    const V pow2n = (V)((n + 127) << 23);
    return LANE(vselect)(tiny, (V){0}, t * pow2n);
}

/* tanh(x), within 3 ulp of tanhf: |x| < 0.4 by its odd Taylor series to x^13 (the next term is
 * below 1e-8 of the result); beyond, (1 − e) / (1 + e) with e = e^(−2|x|) ≤ 0.45 (no cancellation),
 * the sign put back. NaN stays NaN, ±inf gives ±1. */
static FA_INLINE V LANE(vtanh)(V x)
{
    const I sign = (I)x & INT32_MIN;
    const V a = (V)((I)x ^ sign), a2 = a * a;
    V t = a2 * (21844.0f / 6081075.0f) - 1382.0f / 155925.0f;
    t = t * a2 + 62.0f / 2835.0f;
    t = t * a2 - 17.0f / 315.0f;
    t = t * a2 + 2.0f / 15.0f;
    t = t * a2 - 1.0f / 3.0f;
    const V e = LANE(exp2_neg)(a * (-2.0f * 1.4426950408889634f));
    const V r = LANE(vselect)(a < 0.4f, a + a * a2 * t, (1.0f - e) / (1.0f + e));
    return (V)((I)r | sign);
}

/* R rows of gemm's C = A B (or C · c_scale + A B) from row r0, two vectors of columns at a time,
 * summed in registers from zero; R is a constant where this is inlined (at most RMAX). */
static FA_INLINE void LANE(gemm_rows)(float *restrict C, int64_t ldc, const float *restrict A, int64_t a_rs,
                                      int64_t a_cs, const float *restrict B, int64_t ldb, int r0, int R, int N,
                                      int64_t K, const float *restrict c_scale)
{
    enum { RMAX = LANES == 16 ? MR : 6, W = 2 * LANES };
    for (int c0 = 0; c0 < N; c0 += W) {
        const int64_t kc = c_scale != NULL && K > 0 ? K : KC;         /* P V, dV, dK: K <= 64 keys */
        for (int64_t k0 = 0; k0 < K || k0 == 0; k0 += kc) {
            const int64_t k1 = k0 + kc < K ? k0 + kc : K;
            V acc[RMAX][2] = {{{0}}};
            for (int64_t k = k0; k < k1; k++) {
                const V *b = (const V *)(B + k * ldb + c0);
                const V b0 = b[0], b1 = b[1];
                for (int r = 0; r < R; r++) {
                    const float a = A[(r0 + r) * a_rs + k * a_cs];
                    acc[r][0] += a * b0;
                    acc[r][1] += a * b1;
                }
            }
            for (int r = 0; r < R; r++) {
                V *c = (V *)(C + (r0 + r) * ldc + c0);
                if (k0 > 0) {
                    c[0] += acc[r][0];
                    c[1] += acc[r][1];
                } else if (c_scale != NULL) {
                    c[0] = c[0] * c_scale[r0 + r] + acc[r][0];
                    c[1] = c[1] * c_scale[r0 + r] + acc[r][1];
                } else {
                    c[0] = acc[r][0];
                    c[1] = acc[r][1];
                }
            }
        }
    }
}

/* gemm's C = A B (or C · c_scale + A B) in blocks of rows × two vectors of columns: 8 × 32 in 16
 * accumulators of 16 floats (AVX-512's 32 registers); 6 × 16 in 12 of 8 floats (15 of AVX2's 16
 * with B's two and A's broadcast), the rows past the last whole 6 four at a time (M = 6n + 2 as
 * 6(n − 1) + 4 + 4). Each element of C is summed alike whatever its block. M % MR == 0,
 * N % (2 · LANES) == 0. */
static FA_INLINE void LANE(gemm)(float *restrict C, int64_t ldc, const float *restrict A, int64_t a_rs,
                                 int64_t a_cs, const float *restrict B, int64_t ldb, int M, int N, int64_t K,
                                 const float *restrict c_scale)
{
    if (LANES == 16) {
        for (int r0 = 0; r0 < M; r0 += MR)
            LANE(gemm_rows)(C, ldc, A, a_rs, a_cs, B, ldb, r0, MR, N, K, c_scale);
        return;
    }
    const int six = M % 6 == 2 && M >= 8 ? M / 6 - 1 : M / 6;
    for (int r0 = 0; r0 < 6 * six; r0 += 6)
        LANE(gemm_rows)(C, ldc, A, a_rs, a_cs, B, ldb, r0, 6, N, K, c_scale);
    for (int r0 = 6 * six; r0 < M; r0 += 4)
        LANE(gemm_rows)(C, ldc, A, a_rs, a_cs, B, ldb, r0, 4, N, K, c_scale);
}

/* The forward's online softmax of one block of scores, across queries in whole vectors: Sᵀ (bn keys ×
 * ncols queries, rows BM floats apart) becomes Pᵀ = exp2(Sᵀ − m_new), and per query (m, l, alpha: one
 * float each, ncols of them)
 *     m_new = max(m, rowmax(S)),  alpha = exp2(m − m_new),  l = l · alpha + rowsum(P),  m = m_new
 * with 0 for m_new as the reference of a query that has seen only −inf (vref). */
static FA_INLINE void LANE(softmax_cols)(float *restrict st, float *restrict m, float *restrict l,
                                         float *restrict alpha, int bn, int ncols)
{
    enum { NV = BM / LANES };
    const int nv = ncols / LANES;
    V *m_i = (V *)m, *l_i = (V *)l, *al = (V *)alpha;
    V m_new[NV], m_ref[NV], sum[NV];
    for (int g = 0; g < nv; g++)
        m_new[g] = m_i[g];
    for (int k = 0; k < bn; k++)
        for (int g = 0; g < nv; g++)
            m_new[g] = LANE(vmax)(m_new[g], ((const V *)(st + k * BM))[g]);
    for (int g = 0; g < nv; g++) {
        m_ref[g] = LANE(vref)(m_new[g]);
        al[g] = LANE(exp2_neg)(m_i[g] - m_ref[g]);
        sum[g] = (V){0};
    }
    for (int k = 0; k < bn; k++) {
        V *pt = (V *)(st + k * BM);
        for (int g = 0; g < nv; g++) {
            pt[g] = LANE(exp2_neg)(pt[g] - m_ref[g]);
            sum[g] += pt[g];
        }
    }
    for (int g = 0; g < nv; g++) {
        l_i[g] = l_i[g] * al[g] + sum[g];
        m_i[g] = m_new[g];
    }
}

/* The backward's pieces across a block's queries, on Sᵀ and dPᵀ (keys × BM queries, rows BM floats
 * apart; one float per query for the rest). */

/* Each query's max over nb keys of Sᵀ and m0 (the sink), 0 where that is −inf (vref), into m; and
 * l = Σ_j 2^(s − m), the terms in fp32, their sum in double (D: vectors of LANES / 2 doubles). */
static FA_INLINE void LANE(max_sum_cols)(float *restrict m, double *restrict l, const float *restrict st,
                                         int64_t nb, float m0)
{
    enum { NV = BM / LANES };
    V mx[NV];
    D sum[2 * NV] = {{0}};
    for (int g = 0; g < NV; g++)
        mx[g] = (V){0} + m0;
    for (int64_t k = 0; k < nb; k++)
        for (int g = 0; g < NV; g++)
            mx[g] = LANE(vmax)(mx[g], ((const V *)(st + k * BM))[g]);
    for (int g = 0; g < NV; g++)
        mx[g] = LANE(vref)(mx[g]);
    for (int64_t k = 0; k < nb; k++)
        for (int g = 0; g < NV; g++) {
            const V e = LANE(exp2_neg)(((const V *)(st + k * BM))[g] - mx[g]);
            sum[2 * g] += __builtin_convertvector(__builtin_shufflevector(e, e, LANE_LO), D);
            sum[2 * g + 1] += __builtin_convertvector(__builtin_shufflevector(e, e, LANE_HI), D);
        }
    memcpy(m, mx, sizeof mx);
    memcpy(l, sum, sizeof sum);
}

/* Pᵀ = exp2(Sᵀ − shift) · mul over n keys, in place; dsum = Σ_j P dP. */
static FA_INLINE void LANE(probs_cols)(float *restrict st, const float *restrict dpt, const float *restrict shift,
                                       const float *restrict mul, float *restrict dsum, int64_t n)
{
    enum { NV = BM / LANES };
    const V *sh = (const V *)shift, *mu = (const V *)mul;
    V acc[NV] = {{0}};
    for (int64_t k = 0; k < n; k++) {
        V *pt = (V *)(st + k * BM);
        const V *dp_k = (const V *)(dpt + k * BM);
        for (int g = 0; g < NV; g++) {
            pt[g] = LANE(exp2_neg)(pt[g] - sh[g]) * mu[g];
            acc[g] += pt[g] * dp_k[g];
        }
    }
    memcpy(dsum, acc, sizeof acc);
}

/* dSᵀ = Pᵀ ∘ (dPᵀ − D) · scale over n keys, into dPᵀ; times 1 − tanh² (tt, laid out as Sᵀ; NULL:
 * no softcap) over the first nb. */
static FA_INLINE void LANE(dscores_cols)(float *restrict dpt, const float *restrict st, const float *restrict tt,
                                         const float *restrict dd, float scale, int64_t nb, int64_t n)
{
    enum { NV = BM / LANES };
    const V *ddv = (const V *)dd;
    for (int64_t k = 0; k < n; k++) {
        const V *pt = (const V *)(st + k * BM);
        V *ds = (V *)(dpt + k * BM);
        for (int g = 0; g < NV; g++) {
            ds[g] = pt[g] * (ds[g] - ddv[g]) * scale;
            if (tt != NULL && k < nb) {
                const V th = ((const V *)(tt + k * BM))[g];
                ds[g] *= 1.0f - th * th;
            }
        }
    }
}

#undef LANE
#undef LANE_NAME1
#undef LANE_NAME2
#undef V
#undef I
#undef D
#undef LANES
#undef LANE_LO
#undef LANE_HI
