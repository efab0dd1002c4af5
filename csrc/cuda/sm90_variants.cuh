/*
 * sm90_variants.cuh — the variants of fa.h (fa_variants) in the Hopper kernel (sm90.cu): its VAR
 * instantiations' arguments, what each consumer thread precomputes for its rows, the per-score
 * steps (softcap, ALiBi, key_mask, attn_mask, visibility) and the key blocks a tile reads. sm90.cu
 * includes it after its kernel arguments (sm90_args) and FA_SM90_DEVICE; the plain kernels use none
 * of it. The semantics live in fa_variant.h, shared with the C backend.
 */
#ifndef FA_SM90_VARIANTS_CUH
#define FA_SM90_VARIANTS_CUH

#include "fa_variant.h"

/* A VAR launch's variants (fa.h, fa_variants), resolved on the host: the window's sides about
 * δ with causal folded in (right = 0), each −1 when unbounded (also when wider than any row can
 * reach, so that row ± side stays in 32 bits). The kernel takes them as sm90_var_args; the
 * plain kernels keep sm90_args, and their code is unchanged. */
typedef struct {
    fa_variants v;                       /* device pointers: ALiBi, sinks, key_mask, attn_mask */
    int delta;                           /* δ: 0 top-left, Nk − Nq bottom-right */
    int left, right;                     /* visible: i + δ − left <= j <= i + δ + right */
    float scale;                         /* p.scale, natural units */
} sm90_var;

struct sm90_var_args : sm90_args {
    sm90_var var;
};

/* The kernel's argument type: sm90_args, or with VAR sm90_var_args. */
template <bool VAR>
struct sm90_kargs {
    typedef sm90_args type;
};
template <>
struct sm90_kargs<true> {
    typedef sm90_var_args type;
};

#ifdef FA_SM90_DEVICE
/* What a VAR consumer knows about its rows beyond sm90_softmax_ctx: each row's visible keys
 * [lo, hi) from the window and causal about δ, clamped to 0..Nk (rows r = 0, 1: row0, row0 + 8);
 * the keys [all_lo, all_hi) visible to every row of the warpgroup, whose blocks need no mask; and
 * the (b, h) constants of each variant. */
typedef struct {
    int row[2], lo[2], hi[2], rd[2];    /* this thread's rows; rd: row + δ */
    int all_lo, all_hi;
    float c;                            /* scale · log2 e (no softcap) or softcap · log2 e */
    float cap_in;                       /* softcap: scale / softcap; 0: none (a softcap with scale 0
                                           is declined: sm90_dispatch_variants) */
    float slope2;                       /* ALiBi slope · log2 e; 0: none */
    const uint8_t *key_mask;            /* row b of key_mask; NULL: none */
    const uint8_t *mask;                /* attn_mask at (b, h, 0, 0); NULL: none */
    int64_t mask_row, mask_col;         /* its strides in elements */
    int mask_kind, Nq, Nk;
} sm90_var_ctx;

/* Keys [lo, hi) that query `row` may see (window and causal), clamped to 0..Nk. */
__device__ __forceinline__ void var_row_range(const sm90_var &x, int row, int Nk, int &lo, int &hi)
{
    const int64_t i = (int64_t)row + x.delta;
    const int64_t a = x.left >= 0 ? i - x.left : 0, e = x.right >= 0 ? i + x.right + 1 : Nk;
    lo = (int)(a < 0 ? 0 : a > Nk ? Nk : a);
    hi = (int)(e < 0 ? 0 : e > Nk ? Nk : e);
}

template <class C>
__device__ __forceinline__ sm90_var_ctx var_ctx(const sm90_var_args &a, int b, int h, int row_first, int row0)
{
    const sm90_var &x = a.var;
    const fa_variants &v = x.v;
    const int Nk = (int)a.p.Nk;
    sm90_var_ctx y;
    for (int r = 0; r < 2; r++) {
        var_row_range(x, row0 + 8 * r, Nk, y.lo[r], y.hi[r]);
        y.row[r] = row0 + 8 * r;
        y.rd[r] = row0 + 8 * r + x.delta;
    }
    int lo_last, hi_first, unused;
    var_row_range(x, row_first + 63, Nk, lo_last, unused);   /* lo and hi grow with the row */
    var_row_range(x, row_first, Nk, unused, hi_first);
    y.all_lo = lo_last;
    y.all_hi = hi_first;
    y.cap_in = v.softcap > 0.f ? x.scale / v.softcap : 0.f;
    y.c = (v.softcap > 0.f ? v.softcap : x.scale) * FA_LOG2E;
    y.slope2 = fa_alibi_slope2(&v, b, h);
    y.key_mask = v.key_mask != NULL ? v.key_mask + b * v.key_mask_batch_stride : NULL;
    y.mask_kind = v.mask_kind;
    y.mask = NULL;
    if (v.mask != NULL) {
        const int64_t es = v.mask_kind == FA_MASK_BOOL ? 1 : v.mask_kind == FA_MASK_ADD_F32 ? 4 : 2;
        y.mask = (const uint8_t *)v.mask + (b * v.mask_batch_stride + h * v.mask_head_stride) * es;
    }
    y.mask_row = v.mask_row_stride;
    y.mask_col = v.mask_col_stride;
    y.Nq = (int)a.p.Nq;
    y.Nk = Nk;
    return y;
}

/* tanh(x) = 1 − 2 / (1 + e^(2x)): two MUFU ops, absolute error ~1e-7 (±1 beyond |x| ~ 9). */
__device__ __forceinline__ float var_tanh(float x)
{
    float r;
    const float e = ex2(x * (2.f * FA_LOG2E));
    asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(1.f + e));
    return 1.f - 2.f * r;
}

/* VAR: the raw scores q · k of block key0.. (r_s, sm90_softmax's layout) turned into log2 units
 * with every variant of fa.h applied, in its order:
 *     s = scale · q·k;  softcap c: s = c · tanh(s / c);  ALiBi: s −= slope · |i + δ − j|;
 *     a float mask: s += mask[b, h, i, j];  s = −inf where j is not visible (window, causal,
 *     j >= Nk, key_mask, a bool mask). */
template <typename T, class C>
__device__ __forceinline__ void sm90_var_scores(float (&r_s)[C::BN / 2], int key0, int t, const sm90_var_ctx &y)
{
    constexpr int BN = C::BN;
    if (y.cap_in != 0.f) {
#pragma unroll
        for (int i = 0; i < BN / 2; i++)
            r_s[i] = y.c * var_tanh(r_s[i] * y.cap_in);
    } else {
#pragma unroll
        for (int i = 0; i < BN / 2; i++)
            r_s[i] *= y.c;
    }
    if (y.slope2 != 0.f) {
#pragma unroll
        for (int i = 0; i < BN / 2; i++) {
            const int key = key0 + 8 * (i / 4) + 2 * t + i % 2;
            r_s[i] -= y.slope2 * fabsf((float)(y.rd[(i / 2) % 2] - key));
        }
    }
    if (y.key_mask != NULL) {                           /* key_mask[b, j] == 0: hidden */
#pragma unroll
        for (int j = 0; j < BN / 8; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int key = key0 + 8 * j + 2 * t + e;
                if (key < y.Nk && y.key_mask[key] == 0)
                    r_s[4 * j + e] = r_s[4 * j + 2 + e] = -INFINITY;
            }
    }
    if (y.mask != NULL) {                               /* attn_mask[b, h, i, j], any strides */
#pragma unroll
        for (int i = 0; i < BN / 2; i++) {
            const int key = key0 + 8 * (i / 4) + 2 * t + i % 2, row = y.row[(i / 2) % 2];
            if (row < y.Nq && key < y.Nk) {
                const int64_t off = row * y.mask_row + key * y.mask_col;
                if (y.mask_kind == FA_MASK_BOOL) {
                    if (y.mask[off] == 0)
                        r_s[i] = -INFINITY;
                } else {
                    r_s[i] += FA_LOG2E * (y.mask_kind == FA_MASK_ADD_F32 ? ((const float *)y.mask)[off]
                                                                         : to_float(((const T *)y.mask)[off]));
                }
            }
        }
    }
    if (key0 < y.all_lo || key0 + BN > y.all_hi) {     /* the window, causal and Nk */
#pragma unroll
        for (int i = 0; i < BN / 2; i++) {
            const int key = key0 + 8 * (i / 4) + 2 * t + i % 2, r = (i / 2) % 2;
            if (key < y.lo[r] || key >= y.hi[r])
                r_s[i] = -INFINITY;
        }
    }
}

/* The key blocks [kb0, kb0 + nb) that some row of the tile at m0 may see (the window and causal
 * about δ: the first row's lo, the last row's hi); at least one, so that every tile passes through
 * the ring (a tile that sees no key reads block 0, masked whole). */
template <class C>
__device__ __forceinline__ void var_blocks(const sm90_var_args &a, int m0, int &kb0, int &nb)
{
    const int Nk = (int)a.p.Nk, last = min(m0 + C::BM, (int)a.p.Nq) - 1;
    int lo, hi, unused;
    var_row_range(a.var, m0, Nk, lo, unused);
    var_row_range(a.var, last, Nk, unused, hi);
    if (hi <= lo) {
        kb0 = 0;
        nb = 1;
        return;
    }
    kb0 = lo / C::BN;
    nb = (hi + C::BN - 1) / C::BN - kb0;
}
#endif /* FA_SM90_DEVICE */

#endif /* FA_SM90_VARIANTS_CUH */
