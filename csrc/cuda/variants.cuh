/*
 * variants.cuh — the variants of fa.h (fa_variants) in the tensor-core kernels (sm90.cu, sm80.cu):
 * the launch's resolved variants, packed sequences, what each thread precomputes for its rows, the
 * per-score steps (softcap, ALiBi, key_mask, attn_mask, visibility) and the key blocks a tile reads.
 * Both kernels hold scores in the mma C layout, 8 keys × 2 rows per 4 floats: element i of a
 * thread's 16-row strip is (row row0 + 8·((i/2)%2), key key0 + 8·(i/4) + 2t + i%2). The semantics
 * live in fa_variant.h, shared with the C backend. Includes: ptx.cuh (ex2), dtype.cuh (to_float).
 */
#ifndef FA_VARIANTS_CUH
#define FA_VARIANTS_CUH

#include <stdint.h>

#include "fa_variant.h"
#include "softmax.cuh"

/* A launch's variants, resolved on the host (var_resolve): the window's sides about δ with
 * causal folded in (right = 0), each −1 when unbounded (also when wider than any row can reach,
 * so that row + δ ± side stays in 32 bits). With packed sequences δ is each sequence's own
 * (var_seq). */
typedef struct {
    fa_variants v;                       /* device pointers: ALiBi, sinks, key_mask, attn_mask, cu_seqlens */
    int delta;                           /* δ: 0 top-left, Nk − Nq bottom-right (not packed) */
    int left, right;                     /* visible: i + δ − left <= j <= i + δ + right */
    float scale;                         /* p.scale, natural units */
} fa_var;

static inline fa_var var_resolve(const fa_params *p, const fa_variants *v)
{
    const int64_t span = p->Nq + p->Nk;
    const int64_t left = v->window ? v->window_left : -1, right = p->causal ? 0 : v->window ? v->window_right : -1;
    fa_var x;
    x.v = *v;
    x.delta = v->align == FA_ALIGN_BOTTOM_RIGHT ? (int)(p->Nk - p->Nq) : 0;
    x.left = left > span ? -1 : (int)left;
    x.right = right > span ? -1 : (int)right;
    x.scale = p->scale;
    return x;
}

#ifdef __CUDACC__
/* One packed sequence as a tile sees it: its first rows in q/o and in k/v, its lengths and δ.
 * Unpacked calls: the whole (Nq, Nk) problem at rows 0 (packed false). */
typedef struct {
    int64_t q0, k0;
    int Nq, Nk, delta;
    bool packed;
    int64_t total_q;                    /* packed: rows of q, o (lse: (Hq, total_q)) */
} fa_var_seq;

/* The whole (Nq, Nk) problem of an unpacked call. */
__device__ __forceinline__ fa_var_seq var_whole(const fa_var &x, const fa_params &p)
{
    fa_var_seq s;
    s.q0 = s.k0 = 0;
    s.Nq = (int)p.Nq, s.Nk = (int)p.Nk, s.delta = x.delta;
    s.packed = false;
    s.total_q = 0;
    return s;
}

/* Sequence b of a packed call, read from cu_seqlens and clamped so that no row outside the
 * tensors is ever touched (var_seqlens_ok says whether clamping was needed anywhere). */
__device__ __forceinline__ fa_var_seq var_seq(const fa_var &x, const fa_params &p, int64_t b)
{
    if (x.v.cu_seqlens_q == NULL)
        return var_whole(x, p);
    fa_var_seq s;
    const int64_t tq = x.v.total_q, tk = x.v.total_k;
    const int64_t q0 = min(max((int64_t)x.v.cu_seqlens_q[b], (int64_t)0), tq);
    const int64_t q1 = min(max((int64_t)x.v.cu_seqlens_q[b + 1], q0), tq);
    const int64_t k0 = min(max((int64_t)x.v.cu_seqlens_k[b], (int64_t)0), tk);
    const int64_t k1 = min(max((int64_t)x.v.cu_seqlens_k[b + 1], k0), tk);
    s.q0 = q0, s.k0 = k0;
    s.Nq = (int)min(q1 - q0, p.Nq), s.Nk = (int)min(k1 - k0, p.Nk);
    s.delta = x.v.align == FA_ALIGN_BOTTOM_RIGHT ? s.Nk - s.Nq : 0;
    s.packed = true;
    s.total_q = tq;
    return s;
}

/* cu_seqlens as fa.h asks (start at 0, never decrease, lengths <= max_seqlen, end within the
 * tensors), checked by the n threads of the caller, thread `tid` taking every n-th entry: whether
 * this thread saw nothing wrong (the caller ANDs over its threads). */
__device__ __forceinline__ bool var_seqlens_ok(const fa_var &x, const fa_params &p, int tid, int n)
{
    const int32_t *cq = x.v.cu_seqlens_q, *ck = x.v.cu_seqlens_k;
    bool ok = tid != 0 || (cq[0] == 0 && ck[0] == 0 && cq[p.B] <= x.v.total_q && ck[p.B] <= x.v.total_k);
    for (int64_t b = tid; b < p.B; b += n) {
        const int64_t lq = (int64_t)cq[b + 1] - cq[b], lk = (int64_t)ck[b + 1] - ck[b];
        ok = ok && lq >= 0 && lk >= 0 && lq <= p.Nq && lk <= p.Nk;
    }
    return ok;
}

/* Packed sequences that break fa.h's rules (var_seqlens_ok): the whole output and lse are NaN, as
 * on the exact path. CTA blk of n fills its share of the total_q · Hq rows with its THREADS threads. */
template <int THREADS>
__device__ void var_fill_nan(const fa_var &x, const fa_params &p, int64_t blk, int64_t n)
{
    const int64_t rows = x.v.total_q * p.Hq, per = (rows + n - 1) / n;
    const int64_t r0 = blk * per, r1 = min(rows, r0 + per);
    const uint16_t nan = p.dtype == FA_BFLOAT16 ? 0x7fc0 : 0x7e00;
    for (int64_t i = r0 * p.d + threadIdx.x; i < r1 * p.d; i += THREADS) {
        const int64_t r = i / p.d, row = r / p.Hq, h = r % p.Hq;
        ((uint16_t *)p.o)[row * p.o_row_stride + h * p.o_head_stride + i % p.d] = nan;
    }
    if (p.lse != NULL)
        for (int64_t r = r0 + threadIdx.x; r < r1; r += THREADS)
            p.lse[(r % p.Hq) * x.v.total_q + r / p.Hq] = NAN;
}

/* A packed call's CTA of THREADS threads (a 1-D grid, one tile each), at its start: whether its
 * tile, rows m0.. of a sequence of Nq queries, has work. When cu_seqlens break the rules it fills
 * its share of the output with NaN instead (var_fill_nan) and has none. Every thread calls it. */
template <int THREADS>
__device__ __forceinline__ bool var_packed_tile(const fa_var &x, const fa_params &p, int Nq, int m0)
{
    /* Barrier (__syncthreads_and): every thread's share of the check is in. */
    if (!__syncthreads_and(var_seqlens_ok(x, p, threadIdx.x, THREADS))) {
        var_fill_nan<THREADS>(x, p, blockIdx.x, gridDim.x);
        return false;
    }
    return m0 < Nq;
}

/* What a thread knows about its two rows (row0, row0 + 8) beyond its kernel's softmax state: each
 * row's visible keys [lo, hi) from the window and causal about δ, clamped to 0..Nk; the keys
 * [all_lo, all_hi) visible to every row of its strip, whose blocks need no mask; and the (b, h)
 * constants of each variant. */
typedef struct {
    int row[2], lo[2], hi[2], rd[2];    /* this thread's rows; rd: row + δ */
    int all_lo, all_hi;
    float c;                            /* scale · log2 e (no softcap) or softcap · log2 e */
    float cap_in;                       /* softcap: scale / softcap */
    bool cap;                           /* a softcap (also with scale 0: every score capped to 0) */
    float slope2;                       /* ALiBi slope · log2 e; 0: none */
    const uint8_t *key_mask;            /* row b of key_mask; NULL: none */
    const uint8_t *mask;                /* attn_mask at (b, h, 0, 0); NULL: none */
    int64_t mask_row, mask_col;         /* its strides in elements */
    int mask_kind, Nq, Nk;
} fa_var_rows;

/* Keys [lo, hi) that query `row` may see (window and causal about δ), clamped to 0..Nk. */
__device__ __forceinline__ void var_row_range(const fa_var &x, int delta, int row, int Nk, int &lo, int &hi)
{
    const int64_t i = (int64_t)row + delta;
    const int64_t a = x.left >= 0 ? i - x.left : 0, e = x.right >= 0 ? i + x.right + 1 : Nk;
    lo = (int)(a < 0 ? 0 : a > Nk ? Nk : a);
    hi = (int)(e < 0 ? 0 : e > Nk ? Nk : e);
}

/* The rows row0, row0 + 8 of a strip whose rows run row_first..row_last, in sequence s of batch
 * entry b (key_mask, attn_mask, ALiBi (B, Hq)) and head h. scale: |scale| where the kernel has
 * folded the sign into Q (sm80.cu). */
__device__ __forceinline__ fa_var_rows var_rows(const fa_var &x, const fa_var_seq &s, int64_t b, int64_t h,
                                                int row_first, int row_last, int row0, float scale)
{
    const fa_variants &v = x.v;
    fa_var_rows y;
    for (int r = 0; r < 2; r++) {
        var_row_range(x, s.delta, row0 + 8 * r, s.Nk, y.lo[r], y.hi[r]);
        y.row[r] = row0 + 8 * r;
        y.rd[r] = row0 + 8 * r + s.delta;
    }
    int unused;
    var_row_range(x, s.delta, row_last, s.Nk, y.all_lo, unused);     /* lo and hi grow with the row */
    var_row_range(x, s.delta, row_first, s.Nk, unused, y.all_hi);
    y.cap = v.softcap > 0.f;
    y.cap_in = y.cap ? scale / v.softcap : 0.f;
    y.c = (y.cap ? v.softcap : scale) * FA_LOG2E;
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
    y.Nq = s.Nq;
    y.Nk = s.Nk;
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

/* The raw scores q · k of block key0.. of one 16-row strip (BN keys, the C layout above) turned
 * into log2 units with every variant of fa.h applied, in its order:
 *     s = scale · q·k;  softcap c: s = c · tanh(s / c);  ALiBi: s −= slope · |i + δ − j|;
 *     a float mask: s += mask[b, h, i, j];  s = −inf where j is not visible (window, causal,
 *     j >= Nk, key_mask, a bool mask). */
template <typename T, int BN>
__device__ __forceinline__ void var_scores(float (&r_s)[BN / 2], int key0, int t, const fa_var_rows &y)
{
    if (y.cap) {
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

/* The key blocks [kb0, kb0 + nb) of BN keys that some row m0..last of sequence s may see (the
 * window and causal about δ: the first row's lo, the last row's hi); at least one, so that a
 * kernel whose tiles all pass through a ring sees one block (a tile that sees no key reads block
 * 0, masked whole). */
template <int BN>
__device__ __forceinline__ void var_blocks(const fa_var &x, const fa_var_seq &s, int m0, int last, int &kb0, int &nb)
{
    int lo, hi, unused;
    var_row_range(x, s.delta, m0, s.Nk, lo, unused);
    var_row_range(x, s.delta, last, s.Nk, unused, hi);
    if (hi <= lo) {
        kb0 = 0;
        nb = 1;
        return;
    }
    kb0 = lo / BN;
    nb = (hi + BN - 1) / BN - kb0;
}
#endif /* __CUDACC__ */

#endif /* FA_VARIANTS_CUH */
