/*
 * backward_rows.cuh — what the backward's kernels share beyond their tiles: the launch's arguments
 * (bwd_args), the workspace (per query row: the fp32 dQ accumulator, lse₂ and D) and its layout for
 * plain and packed sequences (bwd_row), the packed sequences' checks and NaN fill, and the two
 * row kernels around a family's main kernel:
 *
 *   prep      per query row: Dᵢ = rowsum(dOᵢ ∘ Oᵢ) − dlseᵢ (or delta − dlse), lse in log2 units
 *             (+inf where lse = −inf: the row adds nothing), its row of the dQ accumulator zeroed,
 *             and the sinks' gradient −Σᵢ exp(sink − lseᵢ) Dᵢ
 *   dq        dQ = scale · accumulator, rounded to the output
 *
 * The host steps every backward kernel runs around its own (bwd_prepare, bwd_bind, bwd_prep, bwd_dq)
 * are defined in sm80_backward.cu, the one file that instantiates the row kernels; sm90_backward.cu
 * calls them. Includes: dtype.cuh, ptx.cuh (pack2), variants.cuh (fa_var, var_seq).
 */
#ifndef FA_BACKWARD_ROWS_CUH
#define FA_BACKWARD_ROWS_CUH

#include <math.h>
#include <stdint.h>

#include "dtype.cuh"
#include "ptx.cuh"
#include "variants.cuh"

/* Kernel arguments: the caller's params, the workspace and scalars derived once on the host. */
typedef struct {
    fa_backward_params bp;
    fa_var var;              /* the variants (variants.cuh): ALiBi, key_mask, packed sequences */
    const float *sinks;      /* (Hq) or NULL */
    float scale;             /* p.scale */
    float scale_log2;        /* p.scale · log2(e) */
    float cap_in;            /* softcap: scale / softcap; 0: none */
    float cap2;              /* softcap · log2 e */
    int64_t q_per_kv;        /* Hq / Hkv */
    int64_t n_k_blocks;      /* ceil(Nk / BN) */
    int64_t rows;            /* rows of the workspace: B·Hq·nq_pad, or Hq·head_rows packed */
    int64_t nq_pad;          /* Nq rounded up to BWD_ROWS_PAD: rows per (b, h) (not packed) */
    int64_t head_rows;       /* packed: total_q + BWD_ROWS_PAD rounded up to 32, rows per head (row
                                h·head_rows + q0 + i is query i of the sequence at packed row q0) */
    int64_t first_block;     /* index of this launch's first CTA in the flattened grid */
    int64_t n_blocks;        /* CTAs of the whole grid */
    int D;                   /* the tile's head-dim width: columns of the dQ accumulator */
    float *dq_acc;           /* (rows, D) */
    float *lse2;             /* (rows): lse · log2 e, +inf for a row that adds nothing */
    float *dd;               /* (rows): D − dlse, 0 on padding rows */
    int packed;              /* packed sequences (var.v.cu_seqlens_q) */
    int left, right;         /* query i sees key j when i + δ − left <= j <= i + δ + right */
    int vec_load;            /* q, k, v and dout rows 16-byte aligned */
    int vec_dk, vec_dv;      /* dk, dv rows 16-byte aligned */
    int dq_tiled;            /* the accumulator in 64 × 64 parts (bwd_acc_at), not row by row */
} bwd_args;

/* The dQ accumulator's element (row, col), row by row (rows × D) or, dq_tiled (sm90_backward.cu, not
 * packed), in parts of 64 rows × 64 columns stored one after the other (rows/64, D/64, 64, 64), so
 * that a kernel adds a part with one bulk reduction; in a part, row r's group of 8 columns k sits
 * at group k ^ (r mod 8), which keeps the kernel's fragment stores free of bank conflicts. */
__device__ __forceinline__ int64_t bwd_acc_at(const bwd_args &a, int64_t row, int col)
{
    if (!a.dq_tiled)
        return row * a.D + col;
    const int r = (int)(row % 64), c = col % 64;
    return ((row / 64) * (a.D / 64) + col / 64) * 4096 + r * 64 + (((c / 8) ^ (r % 8)) * 8) + c % 8;
}

/* Rows per (b, h) of the workspace are a multiple of this, and a packed head has this many rows of
 * slack past its last sequence: every kernel's query block (64 or 128 rows) stays inside its head's
 * rows. */
#define BWD_ROWS_PAD 128

/* Host steps shared by the backward kernels (sm80_backward.cu):
 *   bwd_prepare  the arguments of a call, all but the workspace, or FA_ERR_UNSUPPORTED
 *   bwd_bind     the workspace's pointers (FA_ERR_SCRATCH when it is too small)
 *   bwd_prep     the prep kernel (and the sinks' gradient zeroed), before the main kernel
 *   bwd_dq       the dq kernel, after it */
int bwd_prepare(const fa_backward_params *bp, const fa_variants *v, bwd_args *a);
size_t bwd_workspace(const bwd_args *a);
int bwd_bind(bwd_args *a, void *workspace, size_t workspace_bytes);
int bwd_prep(bwd_args *a, cudaStream_t stream);
int bwd_dq(const bwd_args *a, cudaStream_t stream);

/* The workspace row of query i of sequence s (batch entry b), head h (packed only when VAR). */
template <bool VAR>
__device__ __forceinline__ int64_t bwd_row(const bwd_args &a, const fa_var_seq &s, int64_t b, int64_t h, int i)
{
    return VAR && a.packed ? h * a.head_rows + s.q0 + i : (b * a.bp.p.Hq + h) * a.nq_pad + i;
}

/* Packed sequences whose cu_seqlens break fa.h's rules (var_seqlens_ok, checked by every thread of
 * the CTA of THREADS, which all call it): whether they are fine. */
template <int THREADS>
__device__ __forceinline__ bool bwd_seqlens_ok(const bwd_args &a)
{
    /* Barrier (__syncthreads_and): every thread's share of the check is in. */
    return !a.packed || __syncthreads_and(var_seqlens_ok(a.var, a.bp.p, threadIdx.x, THREADS));
}

/* Bad cu_seqlens: every gradient is NaN, as on the exact path. CTA blk of n fills its share of
 * rows (total, heads) of x (row stride rs, head stride hs) with its THREADS threads. */
template <typename T, int THREADS>
__device__ void bwd_fill_nan(void *x, int64_t total, int64_t heads, int64_t rs, int64_t hs, int d, int64_t blk,
                             int64_t n)
{
    const int64_t rows = total * heads, per = (rows + n - 1) / n;
    const int64_t r0 = blk * per, r1 = min(rows, r0 + per);
    for (int64_t i = r0 * d + threadIdx.x; i < r1 * d; i += THREADS) {
        const int64_t r = i / d;
        from_float((T *)x + (r / heads) * rs + (r % heads) * hs + i % d, NAN);
    }
}

/* The row kernels' geometry: a CTA of 256 threads takes 256 / CH rows of the workspace, CH = D / 8
 * threads per row, each thread 8 columns (16 bytes of a 2-byte row, 32 of the accumulator's). nq_pad
 * and head_rows are multiples of 32, so a CTA's rows are in one head: (its first row's head, the
 * position in that head of this thread's row). 32-bit divisions: the launch caps the grid at 2³¹. */
template <int CH>
struct bwd_rows_at {
    static constexpr int RPC = 256 / CH;
    int64_t row;             /* the workspace row */
    int64_t bh;              /* b·Hq + h, or h packed */
    int i;                   /* the row's position in its head's rows */
    int c0;                  /* the thread's first column */
    __device__ __forceinline__ bwd_rows_at(const bwd_args &a)
    {
        const uint32_t per_head = (uint32_t)((a.packed ? a.head_rows : a.nq_pad) / RPC);
        bh = blockIdx.x / per_head;
        i = (int)(blockIdx.x % per_head) * RPC + (int)(threadIdx.x / CH);
        row = (int64_t)blockIdx.x * RPC + threadIdx.x / CH;
        c0 = 8 * (int)(threadIdx.x % CH);
    }
};

/* Σ over columns c0..c0 + 7 of x · y (the columns below d), 16-byte loads where both are aligned. */
template <typename T>
__device__ __forceinline__ float bwd_dot8(const T *x, const T *y, int c0, int d)
{
    float sum = 0.f;
    if (c0 + 8 <= d && (((uintptr_t)(x + c0) | (uintptr_t)(y + c0)) & 15) == 0) {
        const uint4 xv = *reinterpret_cast<const uint4 *>(x + c0), yv = *reinterpret_cast<const uint4 *>(y + c0);
        const T *xe = reinterpret_cast<const T *>(&xv), *ye = reinterpret_cast<const T *>(&yv);
#pragma unroll
        for (int e = 0; e < 8; e++)
            sum += to_float(xe[e]) * to_float(ye[e]);
    } else {
        for (int c = c0; c < min(c0 + 8, d); c++)
            sum += to_float(x[c]) * to_float(y[c]);
    }
    return sum;
}

/* Grid: one CTA per 256 / CH rows of the workspace (bwd_rows_at): (B·Hq, nq_pad), or packed
 * (Hq, head_rows), whose rows past the last sequence add nothing. */
template <typename T, int CH>
__global__ void __launch_bounds__(256)
fa_sm80_backward_prep_kernel(const __grid_constant__ bwd_args a)
{
    constexpr int RPC = bwd_rows_at<CH>::RPC;
    const fa_backward_params &bp = a.bp;
    const fa_params &p = bp.p;
    const bwd_rows_at<CH> at(a);
    __shared__ float s_sink[RPC];
    const bool ok = bwd_seqlens_ok<256>(a);

    /* This CTA's rows of the accumulator zeroed (in parts too: all CTAs together cover it all). */
    float4 *acc = reinterpret_cast<float4 *>(a.dq_acc + (int64_t)blockIdx.x * RPC * a.D);
    acc[threadIdx.x] = make_float4(0.f, 0.f, 0.f, 0.f);
    acc[threadIdx.x + 256] = make_float4(0.f, 0.f, 0.f, 0.f);

    /* This row's query: (b, h, i), real when i is a query; r its index in lse, dlse and delta. */
    int64_t b, h, r;
    const int64_t i = at.i;
    bool real;
    if (a.packed) {
        h = at.bh, b = 0;
        const int64_t end = min(max((int64_t)a.var.v.cu_seqlens_q[p.B], (int64_t)0), a.var.v.total_q);
        real = i < end;
        r = h * a.var.v.total_q + i;                            /* (Hq, total_q) */
    } else {
        b = at.bh / p.Hq, h = at.bh % p.Hq;
        real = i < p.Nq;
        r = at.bh * p.Nq + i;                                   /* (B, Hq, Nq) */
    }
    /* Dᵢ: each of the row's CH threads (adjacent lanes of one warp) sums its 8 columns. */
    float part = 0.f;
    if (real && bp.delta == NULL) {
        const T *o = (const T *)p.o + b * p.o_batch_stride + h * p.o_head_stride + i * p.o_row_stride;
        const T *dO = (const T *)bp.dout + b * bp.do_batch_stride + h * bp.do_head_stride + i * bp.do_row_stride;
        part = bwd_dot8(o, dO, at.c0, (int)p.d);
    }
#pragma unroll
    for (int off = CH / 2; off > 0; off /= 2)
        part += __shfl_xor_sync(0xffffffffu, part, off);
    float dd = 0.f, l2 = INFINITY, sink = 0.f;
    if (real) {
        const float lse = p.lse[r];
        dd = (bp.delta != NULL ? bp.delta[r] : part) - (bp.dlse != NULL ? bp.dlse[r] : 0.f);
        if (lse != -INFINITY) {
            l2 = lse * FA_LOG2E;
            if (a.sinks != NULL)
                sink = -expf(a.sinks[h] - lse) * dd;
        }
    }
    if (at.c0 == 0) {
        a.lse2[at.row] = l2;
        a.dd[at.row] = dd;
        s_sink[threadIdx.x / CH] = ok ? sink : NAN;
    }
    if (a.sinks == NULL)
        return;
    __syncthreads();
    if (threadIdx.x == 0) {
        float x = 0.f;
        for (int w = 0; w < RPC; w++)
            x += s_sink[w];
        if (x != 0.f)
            atomicAdd(bp.dsinks + h, x);
    }
}

/* dq[b, h, i, c] = scale · accumulator: the same CTAs as the prep kernel's, each thread 8 columns (one
 * 16-byte store where the row allows). Packed: rows of q past the last sequence are left alone, and
 * bad cu_seqlens make every row NaN. */
template <typename T, int CH>
__global__ void __launch_bounds__(256)
fa_sm80_backward_dq_kernel(const __grid_constant__ bwd_args a)
{
    const fa_backward_params &bp = a.bp;
    const fa_params &p = bp.p;
    const bool ok = bwd_seqlens_ok<256>(a);
    const bwd_rows_at<CH> at(a);
    const int d = (int)p.d;
    int64_t b, h;
    const int64_t i = at.i;
    if (a.packed) {
        const int64_t end = min(max((int64_t)a.var.v.cu_seqlens_q[p.B], (int64_t)0), a.var.v.total_q);
        if (i >= a.var.v.total_q || (ok && i >= end))
            return;
        b = 0, h = at.bh;
    } else {
        if (i >= p.Nq)
            return;
        b = at.bh / p.Hq, h = at.bh % p.Hq;
    }
    if (at.c0 >= d)
        return;
    const float4 *acc = reinterpret_cast<const float4 *>(a.dq_acc + bwd_acc_at(a, at.row, at.c0));
    const float4 x0 = acc[0], x1 = acc[1];
    const float x[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
    T *dst = (T *)bp.dq + b * bp.dq_batch_stride + h * bp.dq_head_stride + i * bp.dq_row_stride + at.c0;
    if (at.c0 + 8 <= d && ((uintptr_t)dst & 15) == 0) {
        uint4 y;
        uint32_t *ye = reinterpret_cast<uint32_t *>(&y);
#pragma unroll
        for (int e = 0; e < 4; e++)
            ye[e] = ok ? pack2<T>(x[2 * e] * a.scale, x[2 * e + 1] * a.scale) : pack2<T>(NAN, NAN);
        *reinterpret_cast<uint4 *>(dst) = y;
    } else {
        for (int e = 0; e < min(8, d - at.c0); e++)
            from_float(dst + e, ok ? x[e] * a.scale : NAN);
    }
}

#endif /* FA_BACKWARD_ROWS_CUH */
