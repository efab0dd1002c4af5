/*
 * fp32tc.cu — FlashAttention forward for fp32 on tensor cores, at fp32 accuracy ("3xTF32").
 *
 * Every fp32 operand x is split into TF32 numbers, big + small = x to ~2⁻²² relative, and a
 * product is taken as three TF32 MMAs,
 *     a·b ≈ small_a·big_b + big_a·small_b + big_a·big_b     (small·small, ~2⁻²², dropped),
 * issued in that order into one accumulator (the small terms are summed before the big one
 * joins). It is the arithmetic of SDPA's fp32 efficient backend (CUTLASS OpMultiplyAddFastF32).
 * V also keeps the bits that big + small miss (rest, at most 2) as a fourth product, big_P·rest_V,
 * issued first: a row whose softmax weight is all on one key (P = 1) gets that value row back
 * exactly, as from FFMA. The splits are integer masks and adds (split3_fast); a tile holding ±inf
 * or NaN, found as it lands (__syncthreads_or), takes split3_safe, which keeps FFMA's answers.
 *
 * One CTA of 4 warps owns BM = 64 query rows of one (batch, head); warp w owns rows 16w..16w+15
 * and walks the key blocks of BN keys, which arrive through cp.async rings of STAGES buffers
 * for K and for V (the sm80.cu pipeline). Per block, with Q pre-scaled by scale · log2(e) where
 * |scale · log2 e| ≤ 1 (else S takes a power of two of it after the product and Q the rest, so
 * that no scale overflows Q: fa_q_multiplier):
 *
 *     S = Q Kᵀ                                  mma.m16n8k8.tf32 × 3, fresh accumulator per 32 d
 *     m_new = max(m_i, rowmax(S))
 *     P = exp2(S − m_new),  alpha = exp2(m_i − m_new)
 *     l_i = l_i · alpha + rowsum(P)
 *     O = O · alpha + P V                       P V in a fresh accumulator, added by FFMA
 *     O /= l_i,  lse = (m_i + log2 l_i) · ln 2  at the end
 *
 * Tensor cores add into their accumulator with truncation, so a running O accumulated by MMA
 * over thousands of keys would drift; each block's P V is summed from zero (BN/8 · 3 MMAs) and
 * added into O with ordinary rounded FFMA.
 *
 * Fragments (g = lane / 4, t = lane % 4; m16n8k8.tf32: A a0 (g, t), a1 (g+8, t), a2 (g, t+4),
 * a3 (g+8, t+4); B b0 (k t, n g), b1 (k t+4, n g); C c0, c1 (g, 2t, 2t+1), c2, c3 (g+8, ...)):
 *   - Q (A) and K (B of S = Q Kᵀ) come from ldmatrix.b16, which sees one fp32 as two b16: an
 *     8 × 8-b16 matrix is 8 rows × 4 fp32 and lane l receives row l/4, fp32 column l%4, which is
 *     (g, t), the A layout for Q rows and the B layout for K stored [key][dim].
 *   - P (A of P V) is the S accumulator itself: the k index of the P V MMA is free to name any
 *     key of the 8, so k = t names key 2t and k = t+4 names key 2t+1; then a0, a1, a2, a3 of P
 *     are c0, c2, c1, c3 of S, and V's b0, b1 are rows 2t and 2t+1 of the 8-key step.
 *   - The n index of P V is free too: in a group of 4 n-tiles (32 output columns), n = g of tile
 *     j names column 4g + j, so one 16-byte LDS of V row key, columns 4g..4g+3, holds b0 (or b1)
 *     of all 4 tiles, and a thread's C entries of row g are the 8 consecutive output columns
 *     8t..8t+7 of the group (c0 of tiles 0-3, then c1 of tiles 0-3): stored as two float4.
 * Shared rows are padded to D + 4 floats: a row starts 16 bytes (4 banks) after the previous
 * one, so an ldmatrix phase (8 rows × 16 bytes) and a quarter-warp's 16-byte V reads (rows 2t,
 * columns 4g) each cover all 32 banks once.
 *
 * Head dims 1..128 are padded to a compiled width (64, 128): columns ≥ d are zero in shared
 * memory and never stored; d > 128 is declined (FA_ERR_UNSUPPORTED, see the tile table). Causal blocks above a warp's rows are skipped and the CTA's last ones never
 * loaded; masks are applied only on tail and diagonal blocks; causal query tiles run heaviest
 * first within a head.
 *
 * Reached through fa_fp32tc_forward(); includes CUDA headers and fa.h only:
 *     nvcc -std=c++17 -O3 -Xptxas -v -gencode arch=compute_90a,code=sm_90a -c csrc/cuda/fp32tc.cu -Icsrc
 * tools/fp32/run.sh checks and times it.
 */
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "families.h"
#include "ptx.cuh"
#include "softmax.cuh"

/* A tile shape: D the compiled head-dim width, BN keys per block, STAGES buffers per K and V
 * ring, MIN_CTAS CTAs per SM that the registers must allow, QS whether Q is kept split (big and
 * small in shared memory, split once) rather than split again for every key block. Always 4
 * warps × 16 query rows. Shared memory: 4 · (D + 4) · (64 · (1 + QS) + 2 · STAGES · BN) bytes. */
template <int D_, int BN_, int STAGES_, int MIN_CTAS_, int QS_ = 0>
struct tc_tile {
    static constexpr int D = D_, BN = BN_, STAGES = STAGES_, MIN_CTAS = MIN_CTAS_, QS = QS_;
    static constexpr int BM = 64, THREADS = 128, LD = D_ + 4;
    static_assert(D % 32 == 0 && BN % 16 == 0 && STAGES >= 1, "tile shape");
};

/* The tiles, Q split once into shared memory (ptxas, nvcc 13.0, sm_90a / sm_80):
 *   d=64:  BN=64, 2 stages, 102 KB: 2 CTAs per SM on sm_90 (1 on sm_80). 232 / 212 registers.
 *   d=128: BN=32, 1 stage, 99 KB: 2 CTAs per SM on sm_90. 254 / 255 registers and 32 / 16 bytes
 *          of spill stores (64-bit values).
 * On the H200 (bench/results/gpu_fp32.md): d=64 42.5-46.0 TFLOP/s non-causal, d=128 41.5-45.3;
 * tools/fp32/run.sh at d=128, N 1k-16k non-causal: two stages with Q split (one CTA per SM)
 * 29-31; the previous tile (Q split per key block, two stages, big truncated) 41-42.
 * d > 128 is declined: O alone is 128 registers there, and every tile tried spilled (BN=32 with
 * one stage, BN=16 with two: 255 registers and 48-80 bytes of spill); fp32.cu runs it. */
#ifndef FA_FP32TC_D128_BN            /* tools/fp32/run.sh also times other tiles */
#define FA_FP32TC_D128_BN 32
#endif
#ifndef FA_FP32TC_D128_STAGES
#define FA_FP32TC_D128_STAGES 1
#endif
#ifndef FA_FP32TC_D128_QS
#define FA_FP32TC_D128_QS 1
#endif
#ifndef FA_FP32TC_D64_QS
#define FA_FP32TC_D64_QS 1
#endif
typedef tc_tile< 64, 64, 2, 2, FA_FP32TC_D64_QS> tc_tile_d64;
typedef tc_tile<128, FA_FP32TC_D128_BN, FA_FP32TC_D128_STAGES, 2, FA_FP32TC_D128_QS> tc_tile_d128;

/* Which of q, k, v, o allow 16-byte accesses (base and every stride a multiple of 4 floats). */
enum { VEC_Q = 1, VEC_K = 2, VEC_V = 4, VEC_O = 8 };

/* Kernel arguments: the caller's params plus scalars derived once on the host. */
typedef struct {
    fa_params p;
    float q_mul, s_mul;      /* q_mul · s_mul = scale · log2(e): Q's factor, multiplied in as Q is
                              * loaded, and the scores' (fa_q_multiplier) */
    int vec;                 /* VEC_* bits */
    int64_t n_q_tiles;       /* ceil(Nq / BM) */
    int64_t q_per_kv;        /* Hq / Hkv */
    int64_t first_block;     /* index of this launch's first CTA in the flattened grid */
} tc_args;

/* Shared memory of one CTA, rows padded to LD = D + 4 floats. */
template <class C>
struct tc_smem {
    float q[1 + C::QS][C::BM][C::LD];    /* Q · scale · log2(e); QS: its big, then small part */
    float k[C::STAGES][C::BN][C::LD];    /* K ring: key block j in stage j % STAGES */
    float v[C::STAGES][C::BN][C::LD];    /* V ring, same stage as K */
};

/* ---- Helpers ------------------------------------------------------------------------------- */

/* Splits: x = big + small + rest, where the MMA reads big and small as TF32 (it ignores the low
 * 13 bits of a .tf32 operand, i.e. truncates) and rest is TF32, with big + small = x to ~2⁻²²
 * relative. Integer masks and adds: full-rate, unlike a conversion; no branches, so that the
 * unrolled MMA loops stay straight-line code.
 *
 * Fast form: big is x rounded to nearest TF32 (ties away: add half a TF32 ulp, clear the rest),
 * r = x − big exact in fp32 (at most 13 significant bits), small = r passed whole: the MMA's
 * truncation keeps 11 of those 13 bits, as good as rounding r (big's rounding halves r, which is
 * what sets the error; SDPA's efficient backend rounds both), and rest = what the truncation
 * drops (at most 2 bits; V only). Three integer/FADD ops for big + small, five with rest. Needs
 * |x| below 0x7f7ff000 (bits), where big cannot round up to inf: a tile holding ±inf, NaN or a
 * value within half a TF32 ulp of FLT_MAX takes the safe form instead (the kernel checks every
 * tile it loads; FP32TC_SAFE_BITS). P (in [0, 1], or NaN that r carries) always takes this form. */
#define FP32TC_SAFE_BITS 0x7f7ff000u
__device__ __forceinline__ void split3_fast(uint32_t x, uint32_t &big, uint32_t &small, uint32_t &rest)
{
    big = (x + 0x1000u) & 0xffffe000u;
    const float r = __uint_as_float(x) - __uint_as_float(big);
    small = __float_as_uint(r);
    rest = __float_as_uint(r - __uint_as_float(small & 0xffffe000u));
}

/* Safe form, any x: x is clamped to ±FLT_MAX, big is the clamped value truncated to TF32 (never
 * rounds past FLT_MAX), small the remainder rounded to nearest TF32, and what the clamp took off
 * joins small; so ±inf gives big = ±the largest TF32 and small = ±inf (an infinite operand meets
 * the other operand's big part, inf · b as in FFMA, never inf · a small part that may be 0 or of
 * the other sign, which is NaN), NaN gives small = NaN (big is then a finite bound), and rest = 0
 * for both. */
__device__ __forceinline__ void split3_safe(uint32_t x, uint32_t &big, uint32_t &small, uint32_t &rest)
{
    const float xf = __uint_as_float(x), xc = fminf(fmaxf(xf, -FLT_MAX), FLT_MAX);
    big = __float_as_uint(xc) & 0xffffe000u;
    const float r = xc - __uint_as_float(big);
    const uint32_t s = (__float_as_uint(r) + 0x1000u) & 0xffffe000u;
    rest = __float_as_uint(r - __uint_as_float(s));
    small = __float_as_uint(__uint_as_float(s) + (xf - xc));
}

template <bool SAFE>
__device__ __forceinline__ void split3_tf32(uint32_t x, uint32_t &big, uint32_t &small, uint32_t &rest)
{
    if (SAFE)
        split3_safe(x, big, small, rest);
    else
        split3_fast(x, big, small, rest);
}

/* big and small only (rest left for the compiler to drop). */
template <bool SAFE>
__device__ __forceinline__ void split_tf32(uint32_t x, uint32_t &big, uint32_t &small)
{
    uint32_t rest;
    split3_tf32<SAFE>(x, big, small, rest);
}

/* Largest |bits| (sign cleared) of four floats: ≥ FP32TC_SAFE_BITS iff one of them is ±inf, NaN
 * or too close to FLT_MAX for the fast split. */
__device__ __forceinline__ uint32_t max_abs_bits(float4 x)
{
    return max(max(__float_as_uint(x.x) & 0x7fffffffu, __float_as_uint(x.y) & 0x7fffffffu),
               max(__float_as_uint(x.z) & 0x7fffffffu, __float_as_uint(x.w) & 0x7fffffffu));
}

/* C += A B, m16n8k8, TF32 inputs, fp32 accumulate; layouts in the header comment. */
__device__ __forceinline__ void mma_tf32(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* C += A B at ~fp32 accuracy from split operands: the small products first, then big · big. */
__device__ __forceinline__ void mma_3xtf32(float c[4], const uint32_t a_big[4], const uint32_t a_small[4],
                                           uint32_t b0_big, uint32_t b1_big, uint32_t b0_small, uint32_t b1_small)
{
    mma_tf32(c, a_small, b0_big, b1_big);
    mma_tf32(c, a_big, b0_small, b1_small);
    mma_tf32(c, a_big, b0_big, b1_big);
}

/* The same with b's rest as a fourth product, issued first: with a = 1 (a_small = 0) and b
 * exactly big + small + rest, the partial sums rest, rest + small, b are all exact, so a row
 * whose softmax puts all its weight on one key returns that key's value row exactly, as FFMA
 * does. */
__device__ __forceinline__ void mma_4xtf32(float c[4], const uint32_t a_big[4], const uint32_t a_small[4],
                                           uint32_t b0_big, uint32_t b1_big, uint32_t b0_small, uint32_t b1_small,
                                           uint32_t b0_rest, uint32_t b1_rest)
{
    mma_tf32(c, a_big, b0_rest, b1_rest);
    mma_3xtf32(c, a_big, a_small, b0_big, b1_big, b0_small, b1_small);
}

/* Issues the copy of key block kb of K or V (g: (Nk, d), row stride in elements) into the shared
 * tile s (BN rows of LD floats): load_rows_f32, rows ≥ Nk and columns ≥ d zero-filled (zero V
 * rows keep 0 · V finite for masked keys). */
template <class C>
__device__ __forceinline__ void load_block(uint32_t s, const float *g, int64_t row_stride, int kb,
                                           int Nk, int d, bool vec)
{
    const int key0 = kb * C::BN, rows = Nk - key0;
    load_rows_f32<C::BN, C::LD, C::D, C::THREADS>(s, g + key0 * row_stride, row_stride, rows, d, vec);
}

/* Whether a float that this thread copied into tile s by load_block (same mapping) needs the
 * safe split (±inf, NaN, or |x| within half a TF32 ulp of FLT_MAX): called once its cp.async group has completed and before the barrier, so it reads only
 * its own copies. The barrier then ORs the answers of all threads (__syncthreads_or). */
template <class C>
__device__ __forceinline__ bool tile_nonfinite(const float *s, bool vec)
{
    constexpr int D = C::D, BN = C::BN, NT = C::THREADS;
    uint32_t m = 0;
    if (vec) {
#pragma unroll
        for (int i = 0; i < BN * D / 4 / NT; i++) {
            const int idx = threadIdx.x + i * NT;
            m = max(m, max_abs_bits(*(const float4 *)(s + idx / (D / 4) * C::LD + idx % (D / 4) * 4)));
        }
    } else {
#pragma unroll 4
        for (int i = 0; i < BN * D / NT; i++) {
            const int idx = threadIdx.x + i * NT;
            m = max(m, __float_as_uint(s[idx / D * C::LD + idx % D]) & 0x7fffffffu);
        }
    }
    return m >= FP32TC_SAFE_BITS;
}

/* S = Q K_jᵀ (scaled) for one warp: 16 × BN, the C fragments of n-tiles of 8 keys, from the
 * Q rows at ldmatrix address q_lane and the K tile at s_k (+ k_lane, see the kernel). Staged:
 * each 32 columns of d go into a fresh accumulator, added to S in fp32. The tensor cores'
 * accumulation truncates; over 3·D/8 MMAs into one accumulator that bias grows with |S| (large
 * logits), over 12 it stays at the level of SDPA's 3xTF32 kernels, which stage the same way.
 * SAFE: the Q tile or this K tile holds ±inf or NaN. */
template <class C, bool SAFE>
__device__ __forceinline__ void qk_block(float r_s[C::BN / 8][4], uint32_t q_lane, uint32_t s_k, uint32_t k_lane)
{
    constexpr int D = C::D, BN = C::BN, LD = C::LD;
    constexpr uint32_t Q_SMALL = 4 * C::BM * LD;       /* bytes from Q's big part to its small */
#pragma unroll
    for (int n = 0; n < BN / 8; n++)
        r_s[n][0] = r_s[n][1] = r_s[n][2] = r_s[n][3] = 0.f;
#pragma unroll 1
    for (int k32 = 0; k32 < D / 32; k32++) {
        float r_t[BN / 8][4];
#pragma unroll
        for (int n = 0; n < BN / 8; n++)
            r_t[n][0] = r_t[n][1] = r_t[n][2] = r_t[n][3] = 0.f;
#pragma unroll
        for (int kk = 4 * k32; kk < 4 * k32 + 4; kk++) {
            uint32_t q_big[4], q_small[4];
            if (C::QS) {
                ldsm_x4(q_big, q_lane + 32 * kk);
                ldsm_x4(q_small, q_lane + Q_SMALL + 32 * kk);
            } else {
                uint32_t q[4];
                ldsm_x4(q, q_lane + 32 * kk);
#pragma unroll
                for (int e = 0; e < 4; e++)
                    split_tf32<SAFE>(q[e], q_big[e], q_small[e]);
            }
#pragma unroll
            for (int np = 0; np < BN / 16; np++) {
                uint32_t k[4], k_big[4], k_small[4];
                ldsm_x4(k, s_k + 4 * 16 * np * LD + k_lane + 32 * kk);
#pragma unroll
                for (int e = 0; e < 4; e++)
                    split_tf32<SAFE>(k[e], k_big[e], k_small[e]);
                mma_3xtf32(r_t[2 * np], q_big, q_small, k_big[0], k_big[1], k_small[0], k_small[1]);
                mma_3xtf32(r_t[2 * np + 1], q_big, q_small, k_big[2], k_big[3], k_small[2], k_small[3]);
            }
        }
#pragma unroll
        for (int n = 0; n < BN / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                r_s[n][e] += r_t[n][e];
    }
}

/* O = O · alpha + P V for one warp, one group of 4 n-tiles (32 columns) at a time, each group's
 * P V summed from zero. For the 8-key step kk, b0 is V row key0 + 8kk + 2t and b1 row + 1 (the
 * key order of P), at column 32·grp + 4g + j for n-tile j: one float4 per row serves the 4 tiles
 * (s_v: this thread's V row 2t, column 4g). V's rest is a fourth product (mma_4xtf32).
 * SAFE: this V tile holds ±inf or NaN. */
template <class C, bool SAFE>
__device__ __forceinline__ void pv_block(float r_o[C::D / 32][4][4], const float alpha[2],
                                         const uint32_t p_big[C::BN / 8][4], const uint32_t p_small[C::BN / 8][4],
                                         const float *s_v)
{
    constexpr int BN = C::BN, LD = C::LD, NG = C::D / 32;
#pragma unroll
    for (int grp = 0; grp < NG; grp++) {
        float r_pv[4][4];
#pragma unroll
        for (int j = 0; j < 4; j++)
            r_pv[j][0] = r_pv[j][1] = r_pv[j][2] = r_pv[j][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < BN / 8; kk++) {
            const float4 v0 = *(const float4 *)(s_v + 8 * kk * LD + 32 * grp);
            const float4 v1 = *(const float4 *)(s_v + (8 * kk + 1) * LD + 32 * grp);
            const float b0[4] = {v0.x, v0.y, v0.z, v0.w}, b1[4] = {v1.x, v1.y, v1.z, v1.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                uint32_t b0_big, b0_small, b0_rest, b1_big, b1_small, b1_rest;
                split3_tf32<SAFE>(__float_as_uint(b0[j]), b0_big, b0_small, b0_rest);
                split3_tf32<SAFE>(__float_as_uint(b1[j]), b1_big, b1_small, b1_rest);
                mma_4xtf32(r_pv[j], p_big[kk], p_small[kk], b0_big, b1_big, b0_small, b1_small,
                           b0_rest, b1_rest);
            }
        }
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                r_o[grp][j][e] = fmaf(r_o[grp][j][e], alpha[e / 2], r_pv[j][e]);
    }
}

/* ---- Kernel -------------------------------------------------------------------------------- */

/* Grid: 1-D, one CTA per (b·Hq + h, query tile); block: 4 warps. */
template <class C>
__global__ void __launch_bounds__(C::THREADS, C::MIN_CTAS)
fa_fp32tc_forward_kernel(const __grid_constant__ tc_args a)
{
    constexpr int D = C::D, BM = C::BM, BN = C::BN, STAGES = C::STAGES, LD = C::LD;
    constexpr int NT = C::THREADS, NG = D / 32;        /* P V column groups of 4 n-tiles */
    extern __shared__ __align__(128) uint8_t smem_raw[];
    tc_smem<C> &s = *reinterpret_cast<tc_smem<C> *>(smem_raw);

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
    /* q, o: (B, Hq, Nq, d); k, v: (B, Hkv, Nk, d). */
    const float *g_q = (const float *)p.q + b * p.q_batch_stride + h * p.q_head_stride;
    const float *g_k = (const float *)p.k + b * p.k_batch_stride + hk * p.k_head_stride;
    const float *g_v = (const float *)p.v + b * p.v_batch_stride + hk * p.v_head_stride;
    const bool vec_k = a.vec & VEC_K, vec_v = a.vec & VEC_V;

    /* Causal: keys past the tile's last row are masked for all its rows, so those blocks are
     * never loaded. Every block below kv_end holds at least one key < Nk. */
    const int kv_end = p.causal ? min(Nk, m0 + BM) : Nk;
    const int n_blocks = (kv_end + BN - 1) / BN;

    /* Prologue. cp.async groups are committed in the order K0, V0, K1, V1, ...; the K ring runs
     * one block ahead of the V ring: K0..K(STAGES−1) and V0..V(STAGES−2) here. */
    load_block<C>(smem_u32(s.k[0]), g_k, p.k_row_stride, 0, Nk, d, vec_k);
    cp_async_commit();
#pragma unroll
    for (int j = 1; j < STAGES; j++) {
        if (j - 1 < n_blocks)
            load_block<C>(smem_u32(s.v[j - 1]), g_v, p.v_row_stride, j - 1, Nk, d, vec_v);
        cp_async_commit();
        if (j < n_blocks)
            load_block<C>(smem_u32(s.k[j]), g_k, p.k_row_stride, j, Nk, d, vec_k);
        cp_async_commit();
    }

    /* Largest |bits| of this thread's scaled Q values (FP32TC_SAFE_BITS: see split3_fast). */
    uint32_t q_bits = 0;
    /* s.q = Q[m0 : m0+BM] · q_mul, rows ≥ Nq and columns ≥ d zero, while K0 lands. Scaling
     * before the mask makes S the exp2 argument for any sign of scale, and a masked −inf stays −inf. */
#pragma unroll
    for (int i = 0; i < BM * D / 4 / NT; i++) {
        const int idx = threadIdx.x + i * NT;
        const int r = idx / (D / 4), c = idx % (D / 4) * 4;
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (m0 + r < Nq)
            load_f32x4(x, g_q + (int64_t)(m0 + r) * p.q_row_stride + c, c, d, a.vec & VEC_Q);
        const float sl = a.q_mul;
        x = make_float4(x.x * sl, x.y * sl, x.z * sl, x.w * sl);
        if (C::QS) {         /* split once, each float4 in the form its values need */
            uint4 big, small;
            uint32_t rest;
            if (max_abs_bits(x) >= FP32TC_SAFE_BITS) {
                split3_safe(__float_as_uint(x.x), big.x, small.x, rest);
                split3_safe(__float_as_uint(x.y), big.y, small.y, rest);
                split3_safe(__float_as_uint(x.z), big.z, small.z, rest);
                split3_safe(__float_as_uint(x.w), big.w, small.w, rest);
            } else {
                split3_fast(__float_as_uint(x.x), big.x, small.x, rest);
                split3_fast(__float_as_uint(x.y), big.y, small.y, rest);
                split3_fast(__float_as_uint(x.z), big.z, small.z, rest);
                split3_fast(__float_as_uint(x.w), big.w, small.w, rest);
            }
            *(uint4 *)&s.q[0][r][c] = big;
            *(uint4 *)&s.q[1][r][c] = small;
        } else {
            q_bits = max(q_bits, max_abs_bits(x));
            *(float4 *)&s.q[0][r][c] = x;
        }
    }

    const int row0 = m0 + 16 * warp;                    /* first query row of this warp */
    const bool warp_live = row0 < Nq;                   /* else the warp only helps load */
    /* ldmatrix.x4 row addresses (bytes). Q: lane gives row lane%16, columns 4·(lane/16)..: the
     * matrices (rows 0-7, cols 0-3), (8-15, 0-3), (0-7, 4-7), (8-15, 4-7) are a0..a3 of one
     * k-step. K: key lane%8 + 8·(lane/16), columns 4·((lane/8)%2)..: (keys 0-7, cols 0-3),
     * (0-7, 4-7), (8-15, 0-3), (8-15, 4-7) are b0, b1 of n-tile 0 and b0, b1 of n-tile 1. */
    const uint32_t q_lane = smem_u32(s.q[0][16 * warp + lane % 16]) + 16 * (lane / 16);
    const uint32_t k_lane = 4 * ((lane % 8 + 8 * (lane / 16)) * LD + 4 * ((lane / 8) % 2));

    /* O: rows g, g+8 of the warp; r_o[grp][j] is the C fragment of n-tile j of column group grp
     * (columns 32·grp + 4n + j for its n = 0..7, see the header). */
    float r_o[NG][4][4];
    float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.f, 0.f};   /* rows g, g+8; l_i partial */
#pragma unroll
    for (int grp = 0; grp < NG; grp++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                r_o[grp][j][e] = 0.f;

    for (int kb = 0; kb < n_blocks; kb++) {
        /* After K_kb, the groups V_kb .. K_(kb+STAGES−1) may still be in flight. */
        cp_async_wait<2 * STAGES - 2>();
        /* Barrier: every thread's copies of K_kb (and its stores of Q) are visible, and every
         * warp has finished block kb−1, whose V stage the load below overwrites. It also tells
         * every thread whether Q or K_kb holds ±inf or NaN (safe splits for S, see split3_fast). */
        const bool safe_s = __syncthreads_or(q_bits >= FP32TC_SAFE_BITS ||
                                             tile_nonfinite<C>(&s.k[kb % STAGES][0][0], vec_k));
        if (kb + STAGES - 1 < n_blocks)
            load_block<C>(smem_u32(s.v[(kb + STAGES - 1) % STAGES]), g_v, p.v_row_stride,
                          kb + STAGES - 1, Nk, d, vec_v);
        cp_async_commit();                              /* possibly empty: keeps the count */

        /* Warps past Nq idle; causal: a block starting past the warp's last row is all masked
         * for it. Block 0 shows key 0 to every row, so after it every m_i is finite and no
         * exp2 below sees −inf − −inf. */
        const int key0 = kb * BN;
        const bool active = warp_live && !(p.causal && key0 > row0 + 15);
        /* P split for P V; entry kk is the A fragment (a0..a3) of keys key0 + 8kk .. +7. */
        uint32_t p_big[BN / 8][4], p_small[BN / 8][4];
        float alpha[2];
        if (active) {
            /* S = Q Kᵀ (scaled): 16 × BN per warp, C fragments of n-tiles of 8 keys. */
            const uint32_t s_k = smem_u32(s.k[kb % STAGES]);
            float r_s[BN / 8][4];
            if (safe_s)
                qk_block<C, true>(r_s, q_lane, s_k, k_lane);
            else
                qk_block<C, false>(r_s, q_lane, s_k, k_lane);
            /* S · s_mul, a power of two past |scale · log2 e| = 1 (a uniform branch: 1 at default scales). */
            if (a.s_mul != 1.f) {
#pragma unroll
                for (int n = 0; n < BN / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        r_s[n][e] *= a.s_mul;
            }

            /* S = −inf where key ≥ Nk or (causal) key > row; only blocks on the Nk tail or
             * crossing the warp's diagonal pay for the mask. */
            if (key0 + BN > Nk || (p.causal && key0 + BN - 1 > row0)) {
#pragma unroll
                for (int n = 0; n < BN / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int key = key0 + 8 * n + 2 * t + e % 2;
                        const int row = row0 + g + 8 * (e / 2);
                        if (key >= Nk || (p.causal && key > row))
                            r_s[n][e] = -INFINITY;
                    }
            }

            /* m_new = max(m_i, rowmax(S)); a row lives on the 4 lanes of a quad (same g).
             * P = exp2(S − m_new), alpha = exp2(m_i − m_new) (0 on the first block),
             * l_i = l_i · alpha + rowsum(P) over this thread's columns. */
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float mx = m_i[r];
#pragma unroll
                for (int n = 0; n < BN / 8; n++)
                    mx = fmaxf(mx, fmaxf(r_s[n][2 * r], r_s[n][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                alpha[r] = ex2(m_i[r] - mx);
                m_i[r] = mx;
                float sum = 0.f;
#pragma unroll
                for (int n = 0; n < BN / 8; n++) {
                    r_s[n][2 * r] = ex2(r_s[n][2 * r] - mx);
                    r_s[n][2 * r + 1] = ex2(r_s[n][2 * r + 1] - mx);
                    sum += r_s[n][2 * r] + r_s[n][2 * r + 1];
                }
                l_i[r] = l_i[r] * alpha[r] + sum;
            }

            /* P as A fragments: key 2t of the step is k = t (a0, a1: rows g, g+8), key 2t+1
             * is k = t+4 (a2, a3), i.e. (a0, a1, a2, a3) = (c0, c2, c1, c3). */
#pragma unroll
            for (int n = 0; n < BN / 8; n++) {
                split_tf32<false>(__float_as_uint(r_s[n][0]), p_big[n][0], p_small[n][0]);
                split_tf32<false>(__float_as_uint(r_s[n][2]), p_big[n][1], p_small[n][1]);
                split_tf32<false>(__float_as_uint(r_s[n][1]), p_big[n][2], p_small[n][2]);
                split_tf32<false>(__float_as_uint(r_s[n][3]), p_big[n][3], p_small[n][3]);
            }
        }

        /* After V_kb, the groups K_(kb+1) .. V_(kb+STAGES−1) may still be in flight. */
        cp_async_wait<2 * STAGES - 2>();
        /* Barrier: every thread's copies of V_kb are visible, and every warp has finished
         * S = Q K_kbᵀ, whose K stage the load below overwrites; and whether V_kb holds ±inf or
         * NaN. P needs no check: it is in [0, 1] or NaN, which the fast split keeps. */
        const bool safe_v = __syncthreads_or(tile_nonfinite<C>(&s.v[kb % STAGES][0][0], vec_v));
        if (kb + STAGES < n_blocks)
            load_block<C>(smem_u32(s.k[kb % STAGES]), g_k, p.k_row_stride, kb + STAGES, Nk, d, vec_k);
        cp_async_commit();

        /* O = O · alpha + P V, one group of 4 n-tiles (32 columns) at a time. For the 8-key step
         * kk, b0 is V row key0 + 8kk + 2t and b1 row + 1 (the key order of P above), at column
         * 32·grp + 4g + j for n-tile j: one float4 per row serves the 4 tiles. */
        if (active) {
            const float *s_v = &s.v[kb % STAGES][2 * t][4 * g];
            if (safe_v)
                pv_block<C, true>(r_o, alpha, p_big, p_small, s_v);
            else
                pv_block<C, false>(r_o, alpha, p_big, p_small, s_v);
        }
    }

    if (!warp_live)
        return;                                         /* no CTA barrier follows */
    float *g_o = (float *)p.o + b * p.o_batch_stride + h * p.o_head_stride;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        /* l = rowsum over the quad; l ≥ 1 since each row's max term is exp2(0). */
        float l = l_i[r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const float inv_l = 1.f / l;
        const int row = row0 + g + 8 * r;
        if (row >= Nq)
            continue;
        /* lse = ln Σ exp(scaled scores) = (m_i + log2 l) · ln 2; lse: (B, Hq, Nq). */
        if (p.lse != NULL && t == 0)
            p.lse[bh * Nq + row] = fa_lse(m_i[r], l);
        /* O row, columns 32·grp + 8t .. +7: c(2r) of tiles 0-3, then c(2r+1) of tiles 0-3. */
        float *dst = g_o + (int64_t)row * p.o_row_stride;
#pragma unroll
        for (int grp = 0; grp < NG; grp++)
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int c = 32 * grp + 8 * t + 4 * half;
                const float4 x = make_float4(r_o[grp][0][2 * r + half] * inv_l, r_o[grp][1][2 * r + half] * inv_l,
                                             r_o[grp][2][2 * r + half] * inv_l, r_o[grp][3][2 * r + half] * inv_l);
                if ((a.vec & VEC_O) && c + 4 <= d) {
                    *(float4 *)(dst + c) = x;
                } else {
                    if (c + 0 < d) dst[c + 0] = x.x;
                    if (c + 1 < d) dst[c + 1] = x.y;
                    if (c + 2 < d) dst[c + 2] = x.z;
                    if (c + 3 < d) dst[c + 3] = x.w;
                }
            }
    }
}

/* ---- Host launch --------------------------------------------------------------------------- */

/* 16-byte accesses need the base and every stride of a tensor to be multiples of 4 floats. */
static bool vec_ok(const void *ptr, int64_t sb, int64_t sh, int64_t sr)
{
    return (uintptr_t)ptr % 16 == 0 && sb % 4 == 0 && sh % 4 == 0 && sr % 4 == 0;
}

/* Launches the tile shape C. */
template <class C>
static int tc_launch(tc_args *a, cudaStream_t stream)
{
    void (*kernel)(const tc_args) = fa_fp32tc_forward_kernel<C>;
    const size_t smem = sizeof(tc_smem<C>);

    /* Once per device: sm_80+ with enough shared memory (else FA_ERR_UNSUPPORTED, and the FFMA kernel
     * takes over), the dynamic shared-memory limit raised. */
    static unsigned s_raised;
    const int st = fa_tc_prepare((const void *)kernel, smem, 80, &s_raised);
    if (st != FA_OK)
        return st;
    return fa_tc_launch_tiles(kernel, a, C::BM, C::THREADS, smem, stream);
}

extern "C" int fa_fp32tc_forward(const fa_params *p, cudaStream_t stream)
{
    /* fp32 only, d ≤ 128 (see the tile table); Nk == 0 (no key for any row) is left to the SIMT
     * kernel. Row and key positions are int in the kernel (element offsets are 64-bit). Past
     * |scale · log2 e| = 2^64 the FFMA kernel: the products that matter then lie near FLT_MIN,
     * where the tensor cores' sums lose bits (1 % of the output at scale 1e38, scores of about 4);
     * below it a product under FLT_MIN weighs under 2^−62 in a score. */
    if (p->dtype != FA_FLOAT32 || p->d > 128 || p->Nk < 1 || p->Nq > INT32_MAX - 256 ||
        p->Nk > INT32_MAX - 256 || !(fabsf(p->scale * FA_LOG2E) <= 0x1p64f))
        return FA_ERR_UNSUPPORTED;

    tc_args a = tc_args{};
    a.p = *p;
    a.q_mul = fa_q_multiplier(p->scale * FA_LOG2E);
    a.s_mul = fa_score_multiplier(p->scale * FA_LOG2E);
    a.q_per_kv = p->Hq / p->Hkv;
    a.vec = (vec_ok(p->q, p->q_batch_stride, p->q_head_stride, p->q_row_stride) ? VEC_Q : 0) |
            (vec_ok(p->k, p->k_batch_stride, p->k_head_stride, p->k_row_stride) ? VEC_K : 0) |
            (vec_ok(p->v, p->v_batch_stride, p->v_head_stride, p->v_row_stride) ? VEC_V : 0) |
            (vec_ok(p->o, p->o_batch_stride, p->o_head_stride, p->o_row_stride) ? VEC_O : 0);
    return p->d <= 64 ? tc_launch<tc_tile_d64>(&a, stream) : tc_launch<tc_tile_d128>(&a, stream);
}
