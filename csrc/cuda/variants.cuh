/*
 * variants.cuh — the variants of fa.h (fa_variants) in the tensor-core kernels (sm90.cu, sm80.cu):
 * the launch's resolved variants, packed sequences, key_mask's range per batch entry, what each
 * thread precomputes for its rows, the per-score steps (softcap, ALiBi, key_mask, attn_mask,
 * visibility) and the key blocks a tile reads.
 * Both kernels hold scores in the mma C layout, 8 keys × 2 rows per 4 floats: element i of a
 * thread's 16-row strip is (row row0 + 8·((i/2)%2), key key0 + 8·(i/4) + 2t + i%2). The semantics
 * live in fa_variant.h, shared with the C backend. Includes: dtype.cuh (to_float).
 */
#ifndef FA_VARIANTS_CUH
#define FA_VARIANTS_CUH

#include <float.h>
#include <limits.h>
#include <stdint.h>

#include "fa_variant.h"
#include "softmax.cuh"

/* Which variants a kernel instantiation takes (the Hopper kernel's VAR parameter): none; the
 * visibility ones alone (window and alignment, key_mask, packed sequences, sinks), whose scores
 * stay as the plain kernel's; every variant (softcap, ALiBi, attn_mask too); or all but attn_mask. */
enum { FA_VAR_NONE = 0, FA_VAR_MASKS = 1, FA_VAR_ALL = 2, FA_VAR_CAP = 3 };

/* The score modifiers an instantiation carries code for (var_rows, var_scores): a flag each. */
enum { FA_MOD_CAP = 1, FA_MOD_ALIBI = 2, FA_MOD_MASK = 4, FA_MODS_ALL = 7 };
#ifdef __CUDACC__
__host__ __device__ constexpr int var_mods(int var)
{
    return var == FA_VAR_ALL ? FA_MODS_ALL : var == FA_VAR_CAP ? FA_MOD_CAP | FA_MOD_ALIBI : 0;
}
#endif

/* A launch's variants, resolved on the host (var_resolve): the window's sides about δ with
 * causal folded in (right = 0), each −1 when unbounded (also when wider than any row can reach,
 * so that row + δ ± side stays in 32 bits). With packed sequences δ is each sequence's own
 * (var_seq). */
typedef struct {
    fa_variants v;                       /* device pointers: ALiBi, sinks, key_mask, attn_mask, cu_seqlens */
    int delta;                           /* δ: 0 top-left, Nk − Nq bottom-right (not packed) */
    int left, right;                     /* visible: i + δ − left <= j <= i + δ + right */
    float scale;                         /* p.scale, natural units */
    bool mask_pairs;                     /* attn_mask of 1- or 2-byte entries, keys adjacent and each
                                          * even key's pair aligned: read two at a time (var_scores) */
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
    const int64_t es = v->mask_kind == FA_MASK_BOOL ? 1 : 2;
    x.mask_pairs = v->mask != NULL && v->mask_kind != FA_MASK_ADD_F32 && v->mask_col_stride == 1
                && (uintptr_t)v->mask % (2 * es) == 0 && v->mask_batch_stride % 2 == 0
                && v->mask_head_stride % 2 == 0 && v->mask_row_stride % 2 == 0;
    return x;
}

#ifdef __CUDACC__
#include "ptx.cuh"

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

/* A packed call's CTA of THREADS threads (sm80.cu: a 1-D grid, one tile each), at its start: whether
 * its tile, rows m0.. of a sequence of Nq queries, has work. (The Hopper kernel votes on
 * var_seqlens_ok at its own first barrier and walks the sequences' tiles: packed_find.) When
 * cu_seqlens break the rules it fills its share of the output with NaN instead (var_fill_nan)
 * and has none. Every thread calls it. */
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

/* The keys that key_mask's row b lets take part: every visible key lies in [lo, hi); dense: every
 * key of [lo, hi) is visible, so the row acts as a window (var_rows folds it into each row's range
 * and drops the per-key test). A row with no visible key: [0, 0). Calls without key_mask: [0, Nk). */
typedef struct {
    int lo, hi;
    bool dense;
} fa_var_keys;

/* The nonzero bytes of the 4 at byte `at` (var_keys_part). */
__device__ __forceinline__ void var_keys_word(uint32_t w, unsigned at, unsigned &lo, unsigned &hi, unsigned &cnt)
{
    const uint32_t bits = __vcmpne4(w, 0u) & 0x01010101u;         /* bit 8k: byte k nonzero */
    if (bits != 0) {
        lo = min(lo, at + (unsigned)(__ffs(bits) - 1) / 8);
        hi = at + (unsigned)(31 - __clz(bits)) / 8 + 1;
        cnt += __popc(bits);
    }
}

/* Thread tid of n's share of the scan of the Nk bytes at m: the first, past-the-last and number of
 * nonzero bytes it saw (UINT_MAX, 0, 0: none). 16-byte loads between a byte-wise head and tail,
 * UNROLL in flight (a warp alone wants several; a CTA's registers may not spare them). */
template <int UNROLL>
__device__ __forceinline__ void var_keys_part(const uint8_t *m, int Nk, int tid, int n, unsigned &lo, unsigned &hi,
                                              unsigned &cnt)
{
    lo = UINT_MAX, hi = 0, cnt = 0;
    const int head = min(Nk, (int)((16 - ((uintptr_t)m & 15)) & 15));
    const int nv = (Nk - head) / 16;
    for (int j = tid; j < head; j += n)
        if (m[j] != 0)
            lo = min(lo, (unsigned)j), hi = (unsigned)j + 1, cnt++;
    const uint4 *mv = reinterpret_cast<const uint4 *>(m + head);
#pragma unroll UNROLL
    for (int i = tid; i < nv; i += n) {
        const uint4 x = __ldg(mv + i);
        const unsigned at = (unsigned)(head + 16 * i);
        var_keys_word(x.x, at, lo, hi, cnt);
        var_keys_word(x.y, at + 4, lo, hi, cnt);
        var_keys_word(x.z, at + 8, lo, hi, cnt);
        var_keys_word(x.w, at + 12, lo, hi, cnt);
    }
    for (int j = head + 16 * nv + tid; j < Nk; j += n)
        if (m[j] != 0)
            lo = min(lo, (unsigned)j), hi = (unsigned)j + 1, cnt++;
}

/* The scans' totals as a range: dense when the visible keys fill it. */
__device__ __forceinline__ fa_var_keys var_keys_make(unsigned lo, unsigned hi, unsigned cnt)
{
    fa_var_keys k;
    k.lo = cnt == 0 ? 0 : (int)lo;
    k.hi = cnt == 0 ? 0 : (int)hi;
    k.dense = cnt == (unsigned)(k.hi - k.lo);
    return k;
}

/* Batch entry b's key range (fa_var_keys) over Nk keys, scanned by the 32 lanes of one warp, which
 * all call it. */
__device__ __forceinline__ fa_var_keys var_keys_warp(const fa_var &x, int Nk, int64_t b, int lane)
{
    unsigned lo, hi, cnt;
    var_keys_part<4>(x.v.key_mask + b * x.v.key_mask_batch_stride, Nk, lane, 32, lo, hi, cnt);
    return var_keys_make(__reduce_min_sync(0xffffffffu, lo), __reduce_max_sync(0xffffffffu, hi),
                         __reduce_add_sync(0xffffffffu, cnt));
}

/* The key ranges of batch entries b0..b1−1, for a CTA whose tiles lie in them: warp `warp` of
 * `warps` scans rows b0 + warp, b0 + warp + warps, ... into keys[b] = (lo | dense << 31, hi).
 * Whole warps call it. */
__device__ __forceinline__ void var_keys_rows(const fa_var &x, const fa_params &p, uint2 *keys, int64_t b0,
                                              int64_t b1, int warp, int warps)
{
    for (int64_t b = b0 + warp; b < b1; b += warps) {
        const fa_var_keys k = var_keys_warp(x, (int)p.Nk, b, threadIdx.x % 32);
        if (threadIdx.x % 32 == 0)
            keys[b] = make_uint2((unsigned)k.lo | (k.dense ? 1u << 31 : 0u), (unsigned)k.hi);
    }
}

/* Batch entry b's key range: from keys (var_keys_rows; its shared-memory address) when there are
 * any (have), else every key of Nk, with the per-key test when a key_mask is given. */
__device__ __forceinline__ fa_var_keys var_keys_get(const fa_var &x, uint32_t keys, bool have, int64_t b, int Nk)
{
    if (!have)
        return fa_var_keys{0, Nk, x.v.key_mask == NULL};
    uint32_t lo, hi;
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(lo), "=r"(hi) : "r"(keys + 8 * (uint32_t)b) : "memory");
    return fa_var_keys{(int)(lo & 0x7fffffffu), (int)hi, (lo >> 31) != 0};
}

/* The same, scanned by the whole CTA of THREADS threads, which all call it (two barriers). */
template <int THREADS>
__device__ __forceinline__ fa_var_keys var_keys_cta(const fa_var &x, const fa_var_seq &s, int64_t b)
{
    if (x.v.key_mask == NULL)
        return fa_var_keys{0, s.Nk, true};
    __shared__ unsigned tot[3];
    if (threadIdx.x == 0)
        tot[0] = UINT_MAX, tot[1] = 0, tot[2] = 0;
    /* Barrier: the totals are reset before any warp adds to them. */
    __syncthreads();
    unsigned lo, hi, cnt;
    var_keys_part<1>(x.v.key_mask + b * x.v.key_mask_batch_stride, s.Nk, threadIdx.x, THREADS, lo, hi, cnt);
    lo = __reduce_min_sync(0xffffffffu, lo), hi = __reduce_max_sync(0xffffffffu, hi);
    cnt = __reduce_add_sync(0xffffffffu, cnt);
    if (threadIdx.x % 32 == 0)
        atomicMin(&tot[0], lo), atomicMax(&tot[1], hi), atomicAdd(&tot[2], cnt);
    /* Barrier: every warp's share is in. */
    __syncthreads();
    return var_keys_make(tot[0], tot[1], tot[2]);
}

/* What a thread knows about its two rows (row0, row0 + 8) beyond its kernel's softmax state: each
 * row's visible keys [lo, hi) from the window and causal about δ, clamped to 0..Nk; the keys
 * [all_lo, all_hi) visible to every row of its strip, whose blocks need no mask; and the (b, h)
 * constants of each variant. */
typedef struct {
    int row[2], lo[2], hi[2], rd[2];    /* this thread's rows; rd: row + δ */
    int all_lo, all_hi;
    float c;                            /* scale · log2 e (no softcap) or softcap · log2 e */
    bool raw;                           /* masks and softcap only: scores stay q·k (with a softcap
                                         * tanh(scale · q·k / softcap)), the softmax scales by c */
    float cap_in;                       /* softcap: scale / softcap */
    bool cap;                           /* a softcap (also with scale 0: every score capped to 0) */
    float slope2;                       /* ALiBi slope · log2 e; 0: none */
    const uint8_t *key_mask;            /* row b of key_mask; NULL: none */
    const uint8_t *mask;                /* attn_mask at (b, h, 0, 0); NULL: none */
    const uint8_t *mask_rows[2];        /* at (b, h, row, 0) for each row (past Nq: the last row) */
    int64_t mask_col;                   /* its key stride in bytes */
    bool mask_pairs;                    /* fa_var.mask_pairs */
    bool mask_bulk;                     /* keys adjacent, this thread's prefetch row 16-byte aligned */
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
 * folded the sign into Q (sm80.cu). raw_ok: the kernel's softmax scales by y.c when y.raw (no
 * ALiBi or float mask to add in log2 units), so var_scores leaves the scores as they are, as the
 * plain kernel does (with a softcap c: tanh(scale · q·k / c), and y.c = c · log2 e); else they
 * arrive in log2 units. MODS (FA_MOD_*): the modifiers this instantiation has code for; the others
 * are taken as absent (FA_VAR_MASKS: softcap, ALiBi and attn_mask). */
template <int MODS = FA_MODS_ALL>
__device__ __forceinline__ fa_var_rows var_rows(const fa_var &x, const fa_var_seq &s, const fa_var_keys &kr,
                                                int64_t b, int64_t h, int row_first, int row_last, int row0,
                                                float scale, bool raw_ok)
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
    if (kr.dense) {                                     /* key_mask as a window: no per-key test */
        for (int r = 0; r < 2; r++)
            y.lo[r] = max(y.lo[r], kr.lo), y.hi[r] = min(y.hi[r], kr.hi);
        y.all_lo = max(y.all_lo, kr.lo), y.all_hi = min(y.all_hi, kr.hi);
    }
    const bool has_mask = (MODS & FA_MOD_MASK) && v.mask != NULL;
    y.cap = (MODS & FA_MOD_CAP) && v.softcap > 0.f;
    y.cap_in = y.cap ? scale / v.softcap : 0.f;
    y.slope2 = (MODS & FA_MOD_ALIBI) ? fa_alibi_slope2(&v, b, h) : 0.f;
    y.raw = raw_ok && y.slope2 == 0.f && (!has_mask || v.mask_kind == FA_MASK_BOOL);
    /* raw: c > 0 even for scale 0, so that a masked −inf stays −inf (not −inf · 0). */
    y.c = y.cap ? v.softcap * FA_LOG2E : y.raw ? fmaxf(scale * FA_LOG2E, FLT_MIN) : scale * FA_LOG2E;
    y.key_mask = v.key_mask != NULL && !kr.dense ? v.key_mask + b * v.key_mask_batch_stride : NULL;
    y.mask_kind = v.mask_kind;
    y.mask = NULL;
    y.mask_pairs = x.mask_pairs;
    const int64_t es = v.mask_kind == FA_MASK_BOOL ? 1 : v.mask_kind == FA_MASK_ADD_F32 ? 4 : 2;
    if (has_mask) {
        y.mask = (const uint8_t *)v.mask + (b * v.mask_batch_stride + h * v.mask_head_stride) * es;
        for (int r = 0; r < 2; r++)
            y.mask_rows[r] = y.mask + (int64_t)min(y.row[r], s.Nq - 1) * v.mask_row_stride * es;
    }
    y.mask_col = v.mask_col_stride * es;
    y.mask_bulk = y.mask != NULL && y.mask_col == es && v.mask_row_stride != 0
               && (uintptr_t)y.mask_rows[0] % 16 == 0 && (uintptr_t)y.mask_rows[1] % 16 == 0;
    y.Nq = s.Nq;
    y.Nk = s.Nk;
    return y;
}

/* tanh(x) in one MUFU op (tanh.approx, relative error about 2⁻¹¹, below a half-precision score's
 * rounding): the softmax's ex2 is the other, and a third would make the MUFU unit the bottleneck. */
__device__ __forceinline__ float var_tanh(float x)
{
    float r;
    asm("tanh.approx.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
}

/* attn_mask's entries for block key0.. of this warp's 16 rows fetched into L2 ahead of var_scores
 * (the loads there would otherwise wait on device memory): lanes t = 0, 1 take row g, lanes 2, 3
 * row g + 8, each one part of the block's bytes below Nk, split at a 16-byte boundary (the rows
 * are 16-byte aligned, and so is each block's first key: BN · entry size is a multiple of 16), as
 * one bulk prefetch of whole 16-byte chunks. */
template <int BN>
__device__ __forceinline__ void var_mask_prefetch(int key0, int t, const fa_var_rows &y)
{
    if (!y.mask_bulk)
        return;
    const int64_t first = (int64_t)key0 * y.mask_col, block = BN * y.mask_col, mid = block / 2 / 16 * 16;
    const int64_t end = min(first + block, (int64_t)y.Nk * y.mask_col);
    const int64_t a = first + (t % 2 ? mid : 0), e = t % 2 ? end : min(first + mid, end);
    const int64_t bytes = (e - a) / 16 * 16;
    if (bytes > 0)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n"
                     :: "l"((t < 2 ? y.mask_rows[0] : y.mask_rows[1]) + a), "r"((uint32_t)bytes) : "memory");
}

/* Score s (log2 units) plus a float attn_mask value m: s + m · log2 e in one fma rounded toward
 * zero, so that a finite m past ±2.3e38 (torch.finfo(float32).min, a padding mask) saturates at
 * ±FLT_MAX, as fa_mask_log2 clamps it in the C backend, rather than overflowing to ∓inf and hiding a
 * key that SDPA keeps; ±inf and NaN pass as they are. */
__device__ __forceinline__ float var_add_mask(float s, float m)
{
    return __fmaf_rz(m, FA_LOG2E, s);
}

/* A 2-byte float attn_mask block added to this warp's scores from shared memory, where the Hopper
 * kernel's TMA staged it (sm90_tile_mask): 64-key panels PANEL bytes apart of 128-byte rows, 16-byte
 * chunk c of row r at c ^ (r mod 8). m_row: the row this lane addresses for ldmatrix (rows 0-7 of
 * the strip for lanes 0-7 and 16-23, rows 8-15 for the others), chunk 0 of panel 0. Each ldmatrix.x4
 * brings 16 keys: registers 0-3 are (row g, keys 8·2jj..), (g + 8, same), (g, 8·(2jj + 1)..),
 * (g + 8, same), element pairs in the C layout. */
template <typename T, int BN, int PANEL>
__device__ __forceinline__ void var_mask_staged(float (&r_s)[BN / 2], uint32_t m_row)
{
    const uint32_t lane = threadIdx.x % 32, hi = lane / 16, xr = lane % 8;
#pragma unroll
    for (int jj = 0; jj < BN / 16; jj++) {
        uint32_t r[4];
        ldsm_x4(r, m_row + (jj / 4) * PANEL + (((2 * (jj % 4) + hi) ^ xr) << 4));
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const uint16_t e0 = (uint16_t)r[k], e1 = (uint16_t)(r[k] >> 16);
            float &s0 = r_s[8 * jj + 2 * k], &s1 = r_s[8 * jj + 2 * k + 1];
            s0 = var_add_mask(s0, to_float(*reinterpret_cast<const T *>(&e0)));
            s1 = var_add_mask(s1, to_float(*reinterpret_cast<const T *>(&e1)));
        }
    }
}

/* Whether var_scores reads block key0.. of attn_mask two keys at a time: whole blocks of a
 * mask_pairs mask. */
template <int BN>
__device__ __forceinline__ bool var_mask_paired(int key0, const fa_var_rows &y)
{
    return y.mask != NULL && y.mask_pairs && key0 + BN <= y.Nk;
}

/* The raw scores q · k of block key0.. of one 16-row strip (BN keys, the C layout above) turned
 * into log2 units (left as they are when y.raw) with every variant of fa.h applied, in its order:
 *     s = scale · q·k;  softcap c: s = c · tanh(s / c);  ALiBi: s −= slope · |i + δ − j|;
 *     a float mask: s += mask[b, h, i, j];  s = −inf where j is not visible (window, causal,
 *     j >= Nk, key_mask, a bool mask). MODS (FA_MOD_*): the modifiers this instantiation has code
 * for (0, FA_VAR_MASKS: the visibility steps alone).
 * MASK_PANEL > 0: the float mask's block is in shared memory (var_mask_staged; m_row this lane's
 * row of it), not read from y.mask. */
template <typename T, int BN, int MODS = FA_MODS_ALL, int MASK_PANEL = 0>
__device__ __forceinline__ void var_scores(float (&r_s)[BN / 2], int key0, int t, const fa_var_rows &y,
                                           uint32_t m_row = 0)
{
    if ((MODS & FA_MOD_CAP) && y.cap) {                 /* in units of the cap */
#pragma unroll
        for (int i = 0; i < BN / 2; i++)
            r_s[i] = var_tanh(r_s[i] * y.cap_in);
    }
    /* ALiBi's slope · |i + δ − j| with the scale's product folded in (y.raw is off with ALiBi), but
     * in the attn_mask kernel (FA_MOD_MASK), which has no registers to spare for it. */
    const bool alibi = (MODS & FA_MOD_ALIBI) && y.slope2 != 0.f, fold = alibi && !(MODS & FA_MOD_MASK);
    if (MODS && !y.raw && !fold) {
#pragma unroll
        for (int i = 0; i < BN / 2; i++)
            r_s[i] *= y.c;
    }
    if (alibi) {
        /* i + δ − j = d0[r] − k for this thread's column k = 8·(i/4) + i%2 of the block (0..BN − 7),
         * as float: one I2F per row and block. Where it has one sign over all of them (every block
         * but the diagonal's), slope · |i + δ − j| = ±(slope · k − slope · d0[r]): a product and a
         * fused add per score, where |·| costs one more. */
        const int e0 = y.rd[0] - key0 - 2 * t, e1 = y.rd[1] - key0 - 2 * t;
        const float d0[2] = {(float)e0, (float)e1};
        const bool left = min(e0, e1) >= BN - 7, right = max(e0, e1) <= 0;
        if (fold && (left || right)) {
            const float sl = left ? y.slope2 : -y.slope2, base[2] = {-sl * d0[0], -sl * d0[1]};
#pragma unroll
            for (int i = 0; i < BN / 2; i++)
                r_s[i] = fmaf(r_s[i], y.c, fmaf(sl, (float)(8 * (i / 4) + i % 2), base[(i / 2) % 2]));
        } else {
#pragma unroll
            for (int i = 0; i < BN / 2; i++)
                r_s[i] = fmaf(-y.slope2, fabsf(d0[(i / 2) % 2] - (float)(8 * (i / 4) + i % 2)),
                              fold ? r_s[i] * y.c : r_s[i]);
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
    if constexpr ((MODS & FA_MOD_MASK) && MASK_PANEL > 0) {     /* attn_mask staged in shared memory */
        var_mask_staged<T, BN, MASK_PANEL>(r_s, m_row);
    } else if ((MODS & FA_MOD_MASK) && var_mask_paired<BN>(key0, y)) { /* attn_mask, two keys per load */
#pragma unroll
        for (int j = 0; j < BN / 8; j++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int64_t at = (int64_t)(key0 + 8 * j + 2 * t) * y.mask_col;
                const int i = 4 * j + 2 * r;
                if (y.mask_kind == FA_MASK_BOOL) {
                    const uint32_t pair = __ldg((const uint16_t *)(y.mask_rows[r] + at));
                    if ((pair & 0xffu) == 0)
                        r_s[i] = -INFINITY;
                    if ((pair & 0xff00u) == 0)
                        r_s[i + 1] = -INFINITY;
                } else {
                    const uint32_t pair = __ldg((const uint32_t *)(y.mask_rows[r] + at));
                    const uint16_t e0 = (uint16_t)pair, e1 = (uint16_t)(pair >> 16);
                    r_s[i] = var_add_mask(r_s[i], to_float(*reinterpret_cast<const T *>(&e0)));
                    r_s[i + 1] = var_add_mask(r_s[i + 1], to_float(*reinterpret_cast<const T *>(&e1)));
                }
            }
    } else if ((MODS & FA_MOD_MASK) && y.mask != NULL) { /* attn_mask[b, h, i, j], any strides */
#pragma unroll
        for (int i = 0; i < BN / 2; i++) {
            const int key = key0 + 8 * (i / 4) + 2 * t + i % 2;
            if (key < y.Nk) {
                const uint8_t *at = y.mask_rows[(i / 2) % 2] + key * y.mask_col;
                if (y.mask_kind == FA_MASK_BOOL) {
                    if (*at == 0)
                        r_s[i] = -INFINITY;
                } else {
                    r_s[i] = var_add_mask(r_s[i], y.mask_kind == FA_MASK_ADD_F32 ? *(const float *)at
                                                                                 : to_float(*(const T *)at));
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
 * window and causal about δ: the first row's lo, the last row's hi; within key_mask's range kr);
 * at least one, so that a kernel whose tiles all pass through a ring sees one block (a tile that
 * sees no key reads block 0, masked whole). */
template <int BN>
__device__ __forceinline__ void var_blocks(const fa_var &x, const fa_var_seq &s, const fa_var_keys &kr, int m0,
                                           int last, int &kb0, int &nb)
{
    int lo, hi, unused;
    var_row_range(x, s.delta, m0, s.Nk, lo, unused);
    var_row_range(x, s.delta, last, s.Nk, unused, hi);
    lo = max(lo, kr.lo), hi = min(hi, kr.hi);
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
