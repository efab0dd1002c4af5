/*
 * fa_sm80_v0.cu — frozen copy of csrc/fa_sm80.cu before the 32-rows-per-warp rewrite (16 rows
 * per warp, K and V of a block in one cp.async group, 8-warp CTAs for d <= 128). Only the
 * baseline row of bench/sm80/tune.cu, which builds it with -Dfa_sm80_forward=fa_sm80_v0_forward;
 * measured on the H200 (bf16, TFLOP/s, non-causal / causal): d=64 N=4k 220 / 210, d=128 N=4k
 * 252 / 233, d=128 N=16k 257 / 260, d=256 N=4k 244 / 219. Not part of the package.
 *
 * One CTA owns BM query rows of one (batch, head); each warp owns 16 of them. The CTA walks the
 * key/value blocks of BN rows through a cp.async ring of STAGES buffers and keeps, per row, the
 * running max m_i, the running sum l_i and the fp32 accumulator O in registers:
 *
 *     S = Q Kᵀ · scale · log2(e)              mma.m16n8k16, fp32 accumulate
 *     m_new = max(m_i, rowmax(S))
 *     P = exp2(S − m_new),  l_i = l_i · exp2(m_i − m_new) + rowsum(P)
 *     O = O · exp2(m_i − m_new) + P V         P stays in registers as the A operand
 *     O /= l_i,  lse = (m_i + log2 l_i) · ln 2  at the end
 *
 * Head dims are padded to a compiled tile width (64, 128 or 256): the extra columns of Q, K and V
 * are zero-filled in shared memory and never stored, so they cost MMA work but not correctness.
 * Shared tiles are row-major with 16-byte chunks XOR-swizzled by (row mod 8), which makes every
 * ldmatrix phase and every cp.async write bank-conflict free.
 *
 * Reached through fa_sm80_forward() (called by the CUDA dispatcher after fa_check_params). Builds
 * with plain nvcc; includes CUDA headers and fa.h only:
 *     nvcc -std=c++17 -O3 -gencode arch=compute_80,code=sm_80 -c csrc/fa_sm80.cu -Icsrc
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include "fa_kernels.h"

/* Tile choices per compiled head-dim width, all to be measured on the H200. Warps = BM / 16;
 * shared memory (BM + 2·stages·BN) · D · 2 bytes; min_ctas: CTAs per SM that the registers must
 * allow (__launch_bounds__). d=64 fits 128 registers without spills, so two 8-warp CTAs share an
 * SM; d=128 spills at 128 (nvcc 13.0), so it runs one 8-warp CTA per SM at ~170 registers;
 * d=256 (4 warps, ~240 registers) gets two per SM without a cap. */
struct sm80_tile { int d, bm, bn, stages, min_ctas; };
static constexpr sm80_tile k_sm80_tiles[] = {
    { 64, 128, 64, 2, 2},   /* 8 warps,  48 KB */
    {128, 128, 64, 2, 1},   /* 8 warps,  96 KB */
    {256,  64, 32, 2, 1},   /* 4 warps,  96 KB: also fits sm_86/89 (99 KB); BN=64 would need 160 KB */
};

/* Kernel arguments: the caller's params plus scalars derived once on the host. */
typedef struct {
    fa_params p;
    float scale_log2;        /* p.scale · log2(e): scores go straight into exp2 */
    int64_t n_q_tiles;       /* ceil(Nq / BM) */
    int64_t q_per_kv;        /* Hq / Hkv */
    int64_t first_block;     /* index of this launch's first CTA in the flattened grid */
    int vec_load;            /* q, k, v rows 16-byte aligned: cp.async; else scalar loads */
    int vec_store;           /* o rows 16-byte aligned: 16-byte stores; else scalar stores */
} sm80_args;

/* Shared memory of one CTA. Element (r, c) of a tile lives in 16-byte chunk (c/8) ^ (r%8). */
template <typename T, int D, int BM, int BN, int STAGES>
struct sm80_smem {
    T q[BM][D];              /* Q tile; at the end each warp stages its O rows here */
    T k[STAGES][BN][D];      /* K ring, one key block per stage */
    T v[STAGES][BN][D];      /* V ring, same stage as K */
};

/* ---- PTX wrappers ------------------------------------------------------------------------- */

__device__ __forceinline__ uint32_t smem_u32(const void *ptr)
{
    return (uint32_t)__cvta_generic_to_shared(ptr);
}

/* Byte offset of chunk c (8 elements) of row r in a swizzled tile with D columns. */
template <int D>
__device__ __forceinline__ uint32_t swz(int r, int c)
{
    return (uint32_t)(r * D * 2 + ((c ^ (r % 8)) << 4));
}

/* Address for ldmatrix.x4 of the 16×16 block at rows r0.., chunks c0, c0+1 (r0 % 8 == 0, c0
 * even), from lane_off = swz<D>(lane % 16, lane / 16). The swizzle only flips bits 4-6 of the
 * offset, so c0's low chunk bits XOR into lane_off and the rest is an immediate. */
template <int D>
__device__ __forceinline__ uint32_t frag_addr(uint32_t tile, uint32_t lane_off, int r0, int c0)
{
    return tile + r0 * D * 2 + (c0 & ~7) * 16 + (lane_off ^ ((c0 & 7) << 4));
}

/* 16-byte async copy; bytes < 16 zero-fills the rest of the chunk (0: all zeros). */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(bytes) : "memory");
}

__device__ __forceinline__ void cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Waits until at most N of this thread's committed groups are still in flight. */
template <int N>
__device__ __forceinline__ void cp_async_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

/* Four 8×8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, register i gets
 * matrix i with (row lane/4, cols 2·(lane%4), +1) in this lane — or, with .trans, the element
 * pair (rows 2·(lane%4), +1; col lane/4). */
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_trans(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t x)
{
    asm volatile("st.shared.b32 [%0], %1;\n" :: "r"(addr), "r"(x) : "memory");
}

__device__ __forceinline__ void st_shared_v4(uint32_t addr, uint4 x)
{
    asm volatile("st.shared.v4.b32 [%0], {%1,%2,%3,%4};\n"
                 :: "r"(addr), "r"(x.x), "r"(x.y), "r"(x.z), "r"(x.w) : "memory");
}

__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr)
{
    uint4 x;
    asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(x.x), "=r"(x.y), "=r"(x.z), "=r"(x.w) : "r"(addr) : "memory");
    return x;
}

/* C += A B, m16n8k16, fp32 accumulate. A 16×16 row-major: a0 (g, 2t..), a1 (g+8, 2t..),
 * a2 (g, 2t+8..), a3 (g+8, 2t+8..); B 16×8 col-major: b0 (k 2t.., n g), b1 (k 2t+8.., n g);
 * C 16×8: c0,c1 (g, 2t..2t+1), c2,c3 (g+8, 2t..2t+1); g = lane/4, t = lane%4. */
template <typename T>
__device__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma16816<__half>(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* 2^x on the SFU (relative error ~2^-22, subnormal results flushed: they only feed sums of
 * terms >= 1); −inf gives +0. exp2f would add a subnormal-range fix-up per element. */
__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* Rounds (lo, hi) to a packed pair; lo is the lower column, in the low 16 bits. */
template <typename T>
__device__ uint32_t pack2(float lo, float hi);

template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi)
{
    __half2 x = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&x);
}

template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi)
{
    __nv_bfloat162 x = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&x);
}

/* ---- Tile loads ---------------------------------------------------------------------------- */

/* Copies rows 0..ROWS-1, columns 0..D-1 of a global tile into a swizzled shared tile; rows >= rows
 * and columns >= d are zero-filled. vec: rows are 16-byte aligned, so cp.async moves 16-byte
 * chunks (a partial last chunk reads only its valid bytes); else plain 2-byte loads, stored at
 * once, which the next __syncthreads publishes like a finished cp.async group. */
template <int ROWS, int D, int THREADS>
__device__ __forceinline__ void load_tile(uint32_t s_tile, const uint16_t *g, int64_t row_stride,
                                          int rows, int d, int vec)
{
    constexpr int CHUNKS = D / 8;                       /* 16-byte chunks per row */
    constexpr int STEP = THREADS / CHUNKS;              /* rows covered by one pass of the CTA */
    static_assert(THREADS % CHUNKS == 0 && ROWS % STEP == 0, "tile must split evenly over threads");
    const int c = threadIdx.x % CHUNKS;                 /* this thread's chunk in every row */
    const int nc = max(0, min(8, d - 8 * c));           /* its valid elements in a valid row */
    if (vec) {
#pragma unroll
        for (int i = 0; i < ROWS / STEP; i++) {
            const int r = threadIdx.x / CHUNKS + i * STEP;
            const int n = r < rows ? nc : 0;
            cp_async16(s_tile + swz<D>(r, c), n ? g + r * row_stride + 8 * c : g, 2 * n);
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < ROWS / STEP; i++) {
        const int r = threadIdx.x / CHUNKS + i * STEP;
        const int n = r < rows ? nc : 0;
        const uint16_t *src = n ? g + r * row_stride + 8 * c : g;
        uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
        for (int e = 0; e < 8; e++)
            if (e < n)
                w[e / 2] |= (uint32_t)src[e] << (16 * (e % 2));
        st_shared_v4(s_tile + swz<D>(r, c), make_uint4(w[0], w[1], w[2], w[3]));
    }
}

/* Issues the loads of key block kb (rows kb·BN..) of K and V into stage kb % STAGES. */
template <typename T, int D, int BM, int BN, int STAGES>
__device__ __forceinline__ void load_kv(sm80_smem<T, D, BM, BN, STAGES> &s, const sm80_args &a,
                                        const uint16_t *g_k, const uint16_t *g_v, int kb)
{
    constexpr int THREADS = BM / 16 * 32;
    const int stage = kb % STAGES;
    const int64_t row0 = (int64_t)kb * BN;
    const int rows = (int)(a.p.Nk - row0);
    load_tile<BN, D, THREADS>(smem_u32(s.k[stage]), g_k + row0 * a.p.k_row_stride,
                              a.p.k_row_stride, rows, (int)a.p.d, a.vec_load);
    load_tile<BN, D, THREADS>(smem_u32(s.v[stage]), g_v + row0 * a.p.v_row_stride,
                              a.p.v_row_stride, rows, (int)a.p.d, a.vec_load);
}

/* ---- Kernel -------------------------------------------------------------------------------- */

/* Grid: 1-D, one CTA per (b·Hq + h, query tile); block: BM / 16 warps. */
template <typename T, int D, int BM, int BN, int STAGES, int MIN_CTAS>
__global__ void __launch_bounds__(BM / 16 * 32, MIN_CTAS)
fa_sm80_kernel(const __grid_constant__ sm80_args a)
{
    constexpr int THREADS = BM / 16 * 32;
    static_assert(BM % 16 == 0 && BN % 16 == 0 && D % 64 == 0 && STAGES >= 2, "tile shape");
    typedef sm80_smem<T, D, BM, BN, STAGES> smem_t;
    extern __shared__ __align__(128) uint8_t smem_raw[];
    smem_t &s = *reinterpret_cast<smem_t *>(smem_raw);

    const fa_params &p = a.p;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane / 4, t = lane % 4;               /* fragment row group, column pair */
    const int d = (int)p.d, Nq = (int)p.Nq, Nk = (int)p.Nk;

    /* CTA → (b·Hq + h, query tile). A head's tiles are consecutive so its K/V stays in L2;
     * causal runs them last-first: the heaviest tiles (most keys) start earliest. */
    const int64_t blk = a.first_block + blockIdx.x;
    const int64_t bh = blk / a.n_q_tiles, rank = blk % a.n_q_tiles;
    const int m0 = (int)(p.causal ? a.n_q_tiles - 1 - rank : rank) * BM;
    const int64_t b = bh / p.Hq, h = bh % p.Hq, hk = h / a.q_per_kv;

    /* g_q: rows m0.. of q[b, h] (Nq, d); g_k, g_v: k[b, hk], v[b, hk] (Nk, d); g_o: o[b, h] */
    const uint16_t *g_q = (const uint16_t *)p.q + b * p.q_batch_stride + h * p.q_head_stride
                        + (int64_t)m0 * p.q_row_stride;
    const uint16_t *g_k = (const uint16_t *)p.k + b * p.k_batch_stride + hk * p.k_head_stride;
    const uint16_t *g_v = (const uint16_t *)p.v + b * p.v_batch_stride + hk * p.v_head_stride;
    uint16_t *g_o = (uint16_t *)p.o + b * p.o_batch_stride + h * p.o_head_stride;

    /* Causal: keys past the tile's last row are masked for all its rows, so those blocks are
     * never loaded. Every block below kv_end holds at least one key < Nk. */
    const int kv_end = p.causal ? min(Nk, m0 + BM) : Nk;
    const int n_blocks = (kv_end + BN - 1) / BN;

    /* Prologue: Q with key block 0 as group 0, then blocks 1..STAGES-2, one group each. */
    load_tile<BM, D, THREADS>(smem_u32(s.q), g_q, p.q_row_stride, Nq - m0, d, a.vec_load);
#pragma unroll
    for (int kb = 0; kb < STAGES - 1; kb++) {
        if (kb < n_blocks)
            load_kv(s, a, g_k, g_v, kb);
        cp_async_commit();
    }

    const int row0 = m0 + 16 * warp;                    /* first query row of this warp */
    const bool warp_live = row0 < Nq;                   /* else the warp only helps load */
    /* ldmatrix.x4 of a 16×16 block: lane gives row lane%16, chunk lane/16 of it, i.e. matrices
     * (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15). */
    const uint32_t lane_off = swz<D>(lane % 16, lane / 16);
    const uint32_t s_q = smem_u32(s.q);

    float r_o[D / 8][4];                                /* O: 16 × D of this warp, C layout */
#pragma unroll
    for (int n = 0; n < D / 8; n++)
        r_o[n][0] = r_o[n][1] = r_o[n][2] = r_o[n][3] = 0.f;
    float m_i[2] = {-INFINITY, -INFINITY};              /* rows g, g+8; log2 units */
    float l_i[2] = {0.f, 0.f};                          /* partial: this thread's columns only */

    for (int kb = 0; kb < n_blocks; kb++) {
        /* Groups committed so far cover blocks ..kb+STAGES-2; all but STAGES-2 done: kb landed. */
        cp_async_wait<STAGES - 2>();
        /* Barrier: every thread's copies of block kb (and Q) are visible, and every warp has
         * finished block kb-1, whose stage the loads below overwrite. */
        __syncthreads();
        if (kb + STAGES - 1 < n_blocks)
            load_kv(s, a, g_k, g_v, kb + STAGES - 1);
        cp_async_commit();                              /* possibly empty: keeps the count */

        const int key0 = kb * BN;
        /* Warps past Nq idle; causal: a block starting past the warp's last row is all masked
         * for it. Both key0 and row0 are multiples of 16, so a block that is not skipped shows
         * key0 to every row: each row max below is finite (no −inf − −inf). */
        if (!warp_live || (p.causal && key0 > row0 + 15))
            continue;
        const uint32_t s_k = smem_u32(s.k[kb % STAGES]), s_v = smem_u32(s.v[kb % STAGES]);

        /* S = Q Kᵀ: 16 × BN per warp. K rows are the n index, so plain ldmatrix of K gives the
         * col-major B fragment: matrices (keys 0-7, k lo), (8-15, lo), (0-7, hi), (8-15, hi)
         * are b0 of n-tile 0, b0 of n-tile 1, b1 of n-tile 0, b1 of n-tile 1. */
        float r_s[BN / 8][4];
#pragma unroll
        for (int n = 0; n < BN / 8; n++)
            r_s[n][0] = r_s[n][1] = r_s[n][2] = r_s[n][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            uint32_t r_q[4];
            ldsm_x4(r_q, frag_addr<D>(s_q, lane_off, 16 * warp, 2 * kk));
#pragma unroll
            for (int np = 0; np < BN / 16; np++) {
                uint32_t r_k[4];
                ldsm_x4(r_k, frag_addr<D>(s_k, lane_off, 16 * np, 2 * kk));
                mma16816<T>(r_s[2 * np], r_q, r_k[0], r_k[2]);
                mma16816<T>(r_s[2 * np + 1], r_q, r_k[1], r_k[3]);
            }
        }

        /* S · scale · log2(e), then −inf where key >= Nk or (causal) key > row; only blocks on
         * the Nk tail or crossing the warp's diagonal pay for the mask. */
        const bool need_mask = key0 + BN > Nk || (p.causal && key0 + BN - 1 > row0);
#pragma unroll
        for (int n = 0; n < BN / 8; n++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float x = r_s[n][e] * a.scale_log2;
                if (need_mask) {
                    const int key = key0 + 8 * n + 2 * t + e % 2;
                    const int row = row0 + g + 8 * (e / 2);
                    if (key >= Nk || (p.causal && key > row))
                        x = -INFINITY;
                }
                r_s[n][e] = x;
            }
        }

        /* m_new = max(m_i, rowmax(S)); a row lives on the 4 lanes of a quad (same g). */
        float m_new[2] = {m_i[0], m_i[1]};
#pragma unroll
        for (int n = 0; n < BN / 8; n++) {
            m_new[0] = fmaxf(m_new[0], fmaxf(r_s[n][0], r_s[n][1]));
            m_new[1] = fmaxf(m_new[1], fmaxf(r_s[n][2], r_s[n][3]));
        }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            m_new[r] = fmaxf(m_new[r], __shfl_xor_sync(0xffffffffu, m_new[r], 1));
            m_new[r] = fmaxf(m_new[r], __shfl_xor_sync(0xffffffffu, m_new[r], 2));
        }

        /* alpha = exp2(m_i − m_new) (0 on the first block: m_i = −inf); O, l_i rescaled. */
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const float alpha = ex2(m_i[r] - m_new[r]);
            m_i[r] = m_new[r];
            l_i[r] *= alpha;
#pragma unroll
            for (int n = 0; n < D / 8; n++) {
                r_o[n][2 * r] *= alpha;
                r_o[n][2 * r + 1] *= alpha;
            }
        }

        /* P = exp2(S − m_new); l_i += rowsum(P) over this thread's columns (fp32, before rounding). */
#pragma unroll
        for (int n = 0; n < BN / 8; n++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                r_s[n][e] = ex2(r_s[n][e] - m_i[e / 2]);
                l_i[e / 2] += r_s[n][e];
            }
        }

        /* O += P V. The C fragments of S n-tiles 2kk, 2kk+1 are exactly the A fragment of P for
         * keys 16kk..16kk+15: a0 = (g, 2t..) of tile 2kk, a1 = its row g+8, a2, a3 = tile 2kk+1.
         * V is (key, col) row-major; ldmatrix.trans of 8 keys × 8 cols gives b = (keys 2t.., col g):
         * matrices (keys 0-7, cols lo), (8-15, lo), (0-7, hi), (8-15, hi) are b0, b1 of n-tile
         * 2n2 and b0, b1 of n-tile 2n2+1. */
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            const uint32_t r_p[4] = {
                pack2<T>(r_s[2 * kk][0], r_s[2 * kk][1]),
                pack2<T>(r_s[2 * kk][2], r_s[2 * kk][3]),
                pack2<T>(r_s[2 * kk + 1][0], r_s[2 * kk + 1][1]),
                pack2<T>(r_s[2 * kk + 1][2], r_s[2 * kk + 1][3]),
            };
#pragma unroll
            for (int n2 = 0; n2 < D / 16; n2++) {
                uint32_t r_v[4];
                ldsm_x4_trans(r_v, frag_addr<D>(s_v, lane_off, 16 * kk, 2 * n2));
                mma16816<T>(r_o[2 * n2], r_p, r_v[0], r_v[1]);
                mma16816<T>(r_o[2 * n2 + 1], r_p, r_v[2], r_v[3]);
            }
        }
    }

    if (!warp_live)
        return;                                         /* no CTA barrier follows */

    /* l = rowsum over the quad; l >= 1 since each row's max term is exp2(0). O /= l. */
    float inv_l[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l_i[r] += __shfl_xor_sync(0xffffffffu, l_i[r], 1);
        l_i[r] += __shfl_xor_sync(0xffffffffu, l_i[r], 2);
        inv_l[r] = 1.f / l_i[r];
    }

    /* lse = ln Σ exp(scaled scores) = (m_i + log2 l) · ln 2; lse: (B, Hq, Nq) contiguous. */
    if (p.lse && t == 0) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = row0 + g + 8 * r;
            if (row < Nq)
                p.lse[bh * p.Nq + row] = (m_i[r] + log2f(l_i[r])) * 0.69314718055994531f;
        }
    }

    /* Stage this warp's O rows in its own Q rows (only this warp ever read them): C fragment
     * (g + 8r, 8n + 2t..) goes to chunk n of row g + 8r, bytes 4t..4t+3. */
#pragma unroll
    for (int n = 0; n < D / 8; n++) {
#pragma unroll
        for (int r = 0; r < 2; r++)
            st_shared_u32(s_q + swz<D>(16 * warp + g + 8 * r, n) + 4 * t,
                          pack2<T>(r_o[n][2 * r] * inv_l[r], r_o[n][2 * r + 1] * inv_l[r]));
    }
    /* Warp barrier: the lanes below read chunks that other lanes of the warp wrote. */
    __syncwarp();

    /* o[b, h, row, 8c..8c+7]: 16-byte stores where aligned and whole, else element by element. */
#pragma unroll
    for (int i = 0; i < 16 * (D / 8) / 32; i++) {
        const int idx = lane + 32 * i;
        const int r = idx / (D / 8), c = idx % (D / 8);
        const int row = row0 + r, n = min(8, d - 8 * c);
        if (row >= Nq || n <= 0)
            continue;
        const uint4 x = ld_shared_v4(s_q + swz<D>(16 * warp + r, c));
        uint16_t *dst = g_o + row * p.o_row_stride + 8 * c;
        if (a.vec_store && n == 8) {
            *reinterpret_cast<uint4 *>(dst) = x;
        } else {
            const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
            for (int e = 0; e < 8; e++)
                if (e < n)
                    dst[e] = (uint16_t)(w[e / 2] >> (16 * (e % 2)));
        }
    }
}

/* ---- Host launch --------------------------------------------------------------------------- */

static int aligned16(const void *ptr, int64_t s0, int64_t s1, int64_t s2)
{
    return (uintptr_t)ptr % 16 == 0 && s0 % 8 == 0 && s1 % 8 == 0 && s2 % 8 == 0;
}

/* Launches the instantiation of tile row I of k_sm80_tiles for element type T. */
template <typename T, int I>
static int sm80_launch(sm80_args *a, cudaStream_t stream)
{
    constexpr sm80_tile tile = k_sm80_tiles[I];
    constexpr int THREADS = tile.bm / 16 * 32;
    typedef sm80_smem<T, tile.d, tile.bm, tile.bn, tile.stages> smem_t;
    void (*kernel)(const sm80_args) =
        fa_sm80_kernel<T, tile.d, tile.bm, tile.bn, tile.stages, tile.min_ctas>;
    const size_t smem = sizeof(smem_t);

    /* Once per device (bit dev of s_raised; devices past 31 are checked every call): the
     * device must be sm_80+ with enough shared memory, and the dynamic limit is raised.
     * Racing threads both set the same value: harmless. */
    static unsigned s_raised;
    int dev;
    if (cudaGetDevice(&dev) != cudaSuccess)
        return FA_ERR_CUDA;
    if (dev >= 32 || !((__atomic_load_n(&s_raised, __ATOMIC_ACQUIRE) >> dev) & 1u)) {
        int major, optin;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess
            || cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
            return FA_ERR_CUDA;
        if (major < 8 || smem > (size_t)optin)
            return FA_ERR_UNSUPPORTED;                  /* the SIMT kernel takes over */
        if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
            return FA_ERR_CUDA;
        if (dev < 32)
            __atomic_fetch_or(&s_raised, 1u << dev, __ATOMIC_RELEASE);
    }

    /* 1-D grid over (b·Hq + h) × query tile, split into launches of at most 2³¹−1 CTAs. */
    a->n_q_tiles = (a->p.Nq + tile.bm - 1) / tile.bm;
    const int64_t total = a->n_q_tiles * a->p.B * a->p.Hq;
    for (int64_t first = 0; first < total; first += INT32_MAX) {
        a->first_block = first;
        const int64_t n = total - first < INT32_MAX ? total - first : INT32_MAX;
        kernel<<<(unsigned)n, THREADS, smem, stream>>>(*a);
        if (cudaGetLastError() != cudaSuccess)
            return FA_ERR_CUDA;
    }
    return FA_OK;
}

extern "C" int fa_sm80_forward(const fa_params *p, cudaStream_t stream)
{
    if (p->dtype == FA_FLOAT32)
        return FA_ERR_UNSUPPORTED;                      /* fp32 has its own kernel */
    /* Row and key positions are int in the kernel (element offsets are 64-bit). Nk == 0 (no
     * key for any row) is left to the SIMT kernel. */
    if (p->Nk < 1 || p->Nq > INT32_MAX - 256 || p->Nk > INT32_MAX - 256)
        return FA_ERR_UNSUPPORTED;

    sm80_args a = {};
    a.p = *p;
    a.scale_log2 = p->scale * 1.4426950408889634f;
    a.q_per_kv = p->Hq / p->Hkv;
    a.vec_load = aligned16(p->q, p->q_batch_stride, p->q_head_stride, p->q_row_stride)
              && aligned16(p->k, p->k_batch_stride, p->k_head_stride, p->k_row_stride)
              && aligned16(p->v, p->v_batch_stride, p->v_head_stride, p->v_row_stride);
    a.vec_store = aligned16(p->o, p->o_batch_stride, p->o_head_stride, p->o_row_stride);

    const int bf16 = p->dtype == FA_BFLOAT16;
    if (p->d <= 64)
        return bf16 ? sm80_launch<__nv_bfloat16, 0>(&a, stream) : sm80_launch<__half, 0>(&a, stream);
    if (p->d <= 128)
        return bf16 ? sm80_launch<__nv_bfloat16, 1>(&a, stream) : sm80_launch<__half, 1>(&a, stream);
    return bf16 ? sm80_launch<__nv_bfloat16, 2>(&a, stream) : sm80_launch<__half, 2>(&a, stream);
}
