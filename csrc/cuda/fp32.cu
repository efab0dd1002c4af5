/*
 * fp32.cu — FlashAttention forward for fp32 on CUDA cores, register-blocked like an SGEMM.
 *
 * Exact fp32 arithmetic (FFMA, no TF32). A CTA of NT = 256 threads owns BM query rows of one
 * (batch, head) and walks the keys BN at a time. The threads form a 16 × 16 grid (tr, tc); thread
 * (tr, tc) owns the TM query rows tr + 16·i and, in turn,
 *
 *     S = Q Kᵀ · scale · log2(e)    keys tc + 16·jj of the tile      (TM × TN micro-tile, FFMA;
 *                                   4-term partial sums, see the S loop; the scale in Q where
 *                                   |scale · log2 e| ≤ 1, else a power of two of it in S:
 *                                   fa_q_multiplier)
 *     m_new = max(m_i, rowmax(S))   16 lanes share a row: 4 xor-shuffles
 *     P = exp2(S − m_new)           written to shared memory
 *     O = O · exp2(m_i − m_new) + P V   columns 4·tc + 64·h .. +3   (TM × D/16 micro-tile, FFMA)
 *     l_i = l_i · exp2(m_i − m_new) + Σ_own P   (a per-thread partial; the 16 partials of a row
 *                                                are summed once, at the end)
 *     O /= l_i,  lse = (m_i + log2 l_i) · ln 2
 *
 * Every inner step reads float4 operands from shared memory: per 4 reduction steps of S a
 * thread loads TM + TN float4 for 4·TM·TN FFMA (8 + 4 for 128 at d=64, 4 + 4 for 64 at d=128),
 * per 4 keys of P V TM + 4·D/64 float4 for 4·TM·D/16 FFMA. K streams through cp.async while the CTA works on S,
 * V while it works on P V, so one buffer of each overlaps load and compute.
 *
 * Shared layouts (all bank-conflict free for the reads above):
 *   s_q[BM][D]     16-byte chunk c of row r at c ^ (r & 1): the two rows a warp reads per
 *                  instruction (tr and tr + 1) fall in different banks.
 *   s_k[BN][D+4]   padded: the 16 keys a half-warp reads per instruction cover every bank twice.
 *   s_v[BN][D]     one row per instruction, broadcast to both half-warps.
 *   s_p[BM][BN]    chunk c of row r at c ^ 4·(r & 1): conflict-free float4 reads in P V and
 *                  conflict-free scalar writes after the softmax.
 *
 * Head dims are padded to a compiled width (64, 128, 256); columns ≥ d are zero in shared memory
 * and never stored. Causal tiles above the diagonal are skipped, masks are applied only on
 * diagonal and tail tiles, and the CTAs with the most keys (last query tiles) start first.
 *
 * Reached through fa_fp32_forward(); includes CUDA headers and fa.h only:
 *     nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -Xptxas -v -c csrc/cuda/fp32.cu -Icsrc
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "families.h"
#include "ptx.cuh"
#include "softmax.cuh"

/* Tile choices per compiled head-dim width; all NT = 256 threads. Shared memory in bytes:
 * 4·(BM·D + BN·(D+4) + BN·D + BM·BN).
 *   d=64:  BM=128, BN=64, TM=8,  97 KB, 2 CTAs/SM on sm_90 (≤ 128 registers), 1 on sm_80.
 *   d=128: BM=64,  BN=64, TM=4, 116 KB, 1 CTA/SM. BM=128 (161 KB, 254 registers and spills
 *          on sm_90a) ran at 14-17 TFLOP/s on the H200, this tile at 30-34 (bench/LOG.md).
 *   d=256: BM=64,  BN=32, TM=4, 137 KB, 1 CTA/SM; BN=64 would need 214 KB (> sm_80).
 * On the H200 (tools/fp32/run.sh, 2026-11-30): 36 TFLOP/s at d=64, 27-29 at d=128. */
enum { NT = 256 };

/* CTAs per SM for d ≤ 64: 2 (128 registers, S loop not unrolled) or 1 (255 registers, unrolled).
 * tools/fp32/run.sh times both; the library keeps the default. */
#ifndef FA_FP32_D128_BM            /* the d=128 tile; tools/fp32/run.sh also times others */
#define FA_FP32_D128_BM 64
#define FA_FP32_D128_BN 64
#define FA_FP32_D128_MIN_CTAS 1
#endif
#ifndef FA_FP32_D64_MIN_CTAS
#define FA_FP32_D64_MIN_CTAS 2
#endif

/* Before sm_90 an SM has at most 164 KB of shared memory, one 97 KB CTA: no register cap there. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define CTAS_PER_SM(n) 1
#else
#define CTAS_PER_SM(n) (n)
#endif

/* Which of q, k, v, o allow 16-byte accesses (base and every stride a multiple of 4 floats). */
enum { VEC_Q = 1, VEC_K = 2, VEC_V = 4, VEC_O = 8 };

template <int D, int BM, int BN>
struct fp32_smem {
    float s_q[BM][D];        /* Q · q_mul, swizzled */
    float s_k[BN][D + 4];    /* K tile, padded */
    float s_v[BN][D];        /* V tile */
    float s_p[BM][BN];       /* P = exp2(S − m), swizzled */
};

__device__ __forceinline__ void cp_async_wait_all(void) { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

/* Rows [0, ROWS) of a (rows, d) global block g into the smem tile s (row stride LD floats),
 * asynchronously, rows ≥ n_valid and columns ≥ d zero-filled: load_rows_f32 (ptx.cuh). */
template <int ROWS, int LD, int D>
__device__ __forceinline__ void load_tile_async(float *s, const float *g, int64_t row_stride,
                                                int64_t n_valid, int d, bool vec)
{
    load_rows_f32<ROWS, LD, D, NT>(smem_u32(s), g, row_stride, n_valid, d, vec);
}

/* q, o: (B, Hq, Nq, d); k, v: (B, Hkv, Nk, d); strides from p. One tile = BM query rows of one
 * (batch, head); tiles are numbered query-tile-major, last (heaviest causal) query tile first.
 * q_mul · s_mul = scale · log2(e): Q's factor and the scores' (fa_q_multiplier). */
template <int D, int BM, int BN, int MIN_CTAS>
__global__ void __launch_bounds__(NT, CTAS_PER_SM(MIN_CTAS))
fa_fp32_forward_kernel(const __grid_constant__ fa_params p, float q_mul, float s_mul, int vec)
{
    constexpr int TM = BM / 16;          /* query rows per thread */
    constexpr int TN = BN / 16;          /* keys of S per thread */
    constexpr int TH = D / 64;           /* float4 column groups of O per thread */
    /* Unrolling S = Q Kᵀ lets the loads of step c4+1 overlap step c4, but under the 128-register
     * cap of two CTAs per SM any unrolling spills (nvcc 13.0, d=64); there the other CTA's warps
     * hide the load latency instead. */
    constexpr int S_UNROLL = CTAS_PER_SM(MIN_CTAS) == 1 ? D / 4 : 1;
    typedef fp32_smem<D, BM, BN> smem_t;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    smem_t &sm = *reinterpret_cast<smem_t *>(smem_raw);

    const int tr = threadIdx.x / 16, tc = threadIdx.x % 16, par = tr & 1;
    const int d = (int)p.d;
    const int64_t n_qtiles = (p.Nq + BM - 1) / BM, n_bh = p.B * p.Hq;
    const int64_t n_tiles = n_qtiles * n_bh;

    for (int64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const int64_t i0 = (n_qtiles - 1 - tile / n_bh) * BM;
        const int64_t bh = tile % n_bh, b = bh / p.Hq, h = bh % p.Hq;
        const int64_t hk = h / (p.Hq / p.Hkv);
        const float *g_q = (const float *)p.q + b * p.q_batch_stride + h * p.q_head_stride + i0 * p.q_row_stride;
        const float *g_k = (const float *)p.k + b * p.k_batch_stride + hk * p.k_head_stride;
        const float *g_v = (const float *)p.v + b * p.v_batch_stride + hk * p.v_head_stride;
        /* Top-left causal: the tile's last row, i0 + BM − 1, sees keys < i0 + BM. */
        const int64_t j_end = p.causal && i0 + BM < p.Nk ? i0 + BM : p.Nk;
        const int n_kt = (int)((j_end + BN - 1) / BN);   /* key tiles; 32-bit for the registers */

        /* K(0) flies while Q is loaded. The previous tile last read s_k and s_q before its final
         * barrier, so both may be overwritten now. */
        load_tile_async<BN, D + 4, D>(&sm.s_k[0][0], g_k, p.k_row_stride, p.Nk, d, vec & VEC_K);
        cp_async_commit();

        /* s_q = Q[i0 : i0+BM] · q_mul; rows ≥ Nq and columns ≥ d zero. */
#pragma unroll
        for (int t = 0; t < BM * D / 4 / NT; t++) {
            const int idx = threadIdx.x + t * NT;
            const int r = idx / (D / 4), c4 = idx % (D / 4), c = 4 * c4;
            float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (i0 + r < p.Nq)
                load_f32x4(x, g_q + r * p.q_row_stride + c, c, d, vec & VEC_Q);
            x.x *= q_mul, x.y *= q_mul, x.z *= q_mul, x.w *= q_mul;
            *(float4 *)&sm.s_q[r][4 * (c4 ^ (r & 1))] = x;
        }

        float r_o[TM][4 * TH], m_i[TM], l_i[TM];
#pragma unroll
        for (int i = 0; i < TM; i++) {
            m_i[i] = -INFINITY;
            l_i[i] = 0.0f;
#pragma unroll
            for (int c = 0; c < 4 * TH; c++) r_o[i][c] = 0.0f;
        }

        for (int t = 0; t < n_kt; t++) {
            const int64_t j0 = (int64_t)t * BN;
            cp_async_wait_all();
            /* K(j0) (and, first time, s_q) visible to every thread; the previous P V is done
             * with s_p and s_v. */
            __syncthreads();
            load_tile_async<BN, D, D>(&sm.s_v[0][0], g_v + j0 * p.v_row_stride, p.v_row_stride,
                                      p.Nk - j0, d, vec & VEC_V);
            cp_async_commit();

            /* S = Q Kᵀ · scale · log2(e): rows tr + 16i, keys tc + 16jj. */
            float r_s[TM][TN];
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int jj = 0; jj < TN; jj++) r_s[i][jj] = 0.0f;
#pragma unroll S_UNROLL
            for (int c4 = 0; c4 < D / 4; c4++) {
                float4 a[TM], bk[TN];
#pragma unroll
                for (int i = 0; i < TM; i++) a[i] = *(const float4 *)&sm.s_q[tr + 16 * i][4 * (c4 ^ par)];
#pragma unroll
                for (int jj = 0; jj < TN; jj++) bk[jj] = *(const float4 *)&sm.s_k[tc + 16 * jj][4 * c4];
                /* The 4 products of a step are summed on their own and then added: S is rounded
                 * at its full size (up to ~80 at large logits) once per 4 terms, not per term.
                 * One FADD more per 4 FFMA; at d = 200 this halves the error of S (the dominant
                 * error of the output when logits are large; bench/LOG.md). */
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int jj = 0; jj < TN; jj++) {
                        float s4 = a[i].x * bk[jj].x;
                        s4 = fmaf(a[i].y, bk[jj].y, s4);
                        s4 = fmaf(a[i].z, bk[jj].z, s4);
                        s4 = fmaf(a[i].w, bk[jj].w, s4);
                        r_s[i][jj] += s4;
                    }
            }
            /* S · s_mul, a power of two past |scale · log2 e| = 1 (a uniform branch: 1 at default scales). */
            if (s_mul != 1.0f) {
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int jj = 0; jj < TN; jj++) r_s[i][jj] *= s_mul;
            }

            /* Mask keys ≥ Nk and, causal, keys j > i; only tail and diagonal tiles need it. */
            if (j0 + BN > p.Nk || (p.causal && j0 + BN - 1 > i0)) {
                /* In tile coordinates: key kk is visible to row rr when kk < n_keys and, causal,
                 * kk − rr ≤ i0 − j0 (clamped to the tile, so 32-bit). */
                const int n_keys = (int)min(p.Nk - j0, (int64_t)BN);
                const int diag = p.causal ? (int)max(min(i0 - j0, (int64_t)BN), (int64_t)-BM) : BN;
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int jj = 0; jj < TN; jj++) {
                        const int rr = tr + 16 * i, kk = tc + 16 * jj;
                        if (kk >= n_keys || kk - rr > diag) r_s[i][jj] = -INFINITY;
                    }
            }

#pragma unroll
            for (int i = 0; i < TM; i++) {
                /* m_new = max(m_i, rowmax(S)) over the 16 lanes (tc) that share the row. */
                float mx = r_s[i][0];
#pragma unroll
                for (int jj = 1; jj < TN; jj++) mx = fmaxf(mx, r_s[i][jj]);
#pragma unroll
                for (int o = 1; o < 16; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
                const float m_new = fmaxf(m_i[i], mx);
                /* A row with no visible key yet keeps exp2's arguments finite with reference 0. */
                const float m_ref = m_new == -INFINITY ? 0.0f : m_new;
                const float alpha = exp2f(m_i[i] - m_ref);
                float sum = 0.0f;
#pragma unroll
                for (int jj = 0; jj < TN; jj++) {
                    const float pj = exp2f(r_s[i][jj] - m_ref);
                    const int r = tr + 16 * i, key = tc + 16 * jj;
                    sm.s_p[r][4 * ((key / 4) ^ (4 * par)) + key % 4] = pj;
                    sum += pj;
                }
                /* l_i = l_i · alpha + Σ P (this thread's keys only); O = O · alpha */
                l_i[i] = l_i[i] * alpha + sum;
                m_i[i] = m_new;
#pragma unroll
                for (int c = 0; c < 4 * TH; c++) r_o[i][c] *= alpha;
            }

            cp_async_wait_all();
            /* P and V(j0) visible to every thread; every warp is done reading s_k. */
            __syncthreads();
            if (t + 1 < n_kt) {
                load_tile_async<BN, D + 4, D>(&sm.s_k[0][0], g_k + (j0 + BN) * p.k_row_stride,
                                              p.k_row_stride, p.Nk - j0 - BN, d, vec & VEC_K);
                cp_async_commit();
            }

            /* O += P V: rows tr + 16i, columns 4tc + 64h .. +3. */
#pragma unroll
            for (int j4 = 0; j4 < BN / 4; j4++) {
                float4 pv[TM];
#pragma unroll
                for (int i = 0; i < TM; i++) pv[i] = *(const float4 *)&sm.s_p[tr + 16 * i][4 * (j4 ^ (4 * par))];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float4 vv[TH];
#pragma unroll
                    for (int hh = 0; hh < TH; hh++) vv[hh] = *(const float4 *)&sm.s_v[4 * j4 + e][4 * tc + 64 * hh];
#pragma unroll
                    for (int i = 0; i < TM; i++) {
                        const float pe = e == 0 ? pv[i].x : e == 1 ? pv[i].y : e == 2 ? pv[i].z : pv[i].w;
#pragma unroll
                        for (int hh = 0; hh < TH; hh++) {
                            r_o[i][4 * hh + 0] = fmaf(pe, vv[hh].x, r_o[i][4 * hh + 0]);
                            r_o[i][4 * hh + 1] = fmaf(pe, vv[hh].y, r_o[i][4 * hh + 1]);
                            r_o[i][4 * hh + 2] = fmaf(pe, vv[hh].z, r_o[i][4 * hh + 2]);
                            r_o[i][4 * hh + 3] = fmaf(pe, vv[hh].w, r_o[i][4 * hh + 3]);
                        }
                    }
                }
            }
        }

        /* O /= l,  lse = (m + log2 l) · ln 2, with l summed over the row's 16 lanes. Every row
         * sees key 0 (Nk ≥ 1), so l ≥ 1. Row and head are recomputed from tile rather than
         * kept live through the key loop (registers). */
        const int64_t row0 = (n_qtiles - 1 - tile / n_bh) * BM, bh_o = tile % n_bh;
        float *g_o = (float *)p.o + bh_o / p.Hq * p.o_batch_stride + bh_o % p.Hq * p.o_head_stride;
#pragma unroll
        for (int i = 0; i < TM; i++) {
            float l = l_i[i];
#pragma unroll
            for (int o = 1; o < 16; o <<= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
            const int64_t row = row0 + tr + 16 * i;
            if (row >= p.Nq) continue;
            const float inv_l = 1.0f / l;
            float *dst = g_o + row * p.o_row_stride;
#pragma unroll
            for (int hh = 0; hh < TH; hh++) {
                const int c = 4 * tc + 64 * hh;
                const float4 x = make_float4(r_o[i][4 * hh + 0] * inv_l, r_o[i][4 * hh + 1] * inv_l,
                                             r_o[i][4 * hh + 2] * inv_l, r_o[i][4 * hh + 3] * inv_l);
                if ((vec & VEC_O) && c + 4 <= d) {
                    *(float4 *)(dst + c) = x;
                } else {
                    if (c + 0 < d) dst[c + 0] = x.x;
                    if (c + 1 < d) dst[c + 1] = x.y;
                    if (c + 2 < d) dst[c + 2] = x.z;
                    if (c + 3 < d) dst[c + 3] = x.w;
                }
            }
            if (p.lse != NULL && tc == 0)
                p.lse[bh_o * p.Nq + row] = (m_i[i] + log2f(l)) * 0.6931471805599453f;
        }
    }
}

/* 16-byte accesses need the base and every stride of a tensor to be multiples of 4 floats. */
static bool vec_ok(const void *ptr, int64_t sb, int64_t sh, int64_t sr)
{
    return (uintptr_t)ptr % 16 == 0 && sb % 4 == 0 && sh % 4 == 0 && sr % 4 == 0;
}

template <int D, int BM, int BN, int MIN_CTAS>
static int launch(const fa_params *p, cudaStream_t stream)
{
    const size_t smem = sizeof(fp32_smem<D, BM, BN>);
    int dev;
    fa_device info;
    const int st = fa_device_current(&dev, &info);
    if (st != FA_OK)
        return st;
    if (info.major < 8 || smem > (size_t)info.smem_optin)
        return FA_ERR_UNSUPPORTED;   /* cp.async needs sm_80; sm_86/89 (99 KB) for d > 64: the dispatcher falls back */
    /* Opt in to > 48 KB of shared memory (per device, so on every launch). */
    FA_CUDA_TRY(cudaFuncSetAttribute(fa_fp32_forward_kernel<D, BM, BN, MIN_CTAS>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));

    const int vec = (vec_ok(p->q, p->q_batch_stride, p->q_head_stride, p->q_row_stride) ? VEC_Q : 0) |
                    (vec_ok(p->k, p->k_batch_stride, p->k_head_stride, p->k_row_stride) ? VEC_K : 0) |
                    (vec_ok(p->v, p->v_batch_stride, p->v_head_stride, p->v_row_stride) ? VEC_V : 0) |
                    (vec_ok(p->o, p->o_batch_stride, p->o_head_stride, p->o_row_stride) ? VEC_O : 0);
    const int64_t n_tiles = (p->Nq + BM - 1) / BM * p->B * p->Hq;
    const unsigned grid = (unsigned)(n_tiles < (int64_t)INT32_MAX ? n_tiles : INT32_MAX);
    const float scale_log2 = p->scale * FA_LOG2E;
    fa_fp32_forward_kernel<D, BM, BN, MIN_CTAS><<<grid, NT, smem, stream>>>(
        *p, fa_q_multiplier(scale_log2), fa_score_multiplier(scale_log2), vec);
    FA_CUDA_TRY(cudaGetLastError());
    return FA_OK;
}

extern "C" int fa_fp32_forward(const fa_params *p, cudaStream_t stream)
{
    if (p->dtype != FA_FLOAT32 || p->Nk == 0)
        return FA_ERR_UNSUPPORTED;
    if (p->d <= 64)
        return launch<64, 128, 64, FA_FP32_D64_MIN_CTAS>(p, stream);
    if (p->d <= 128)
        return launch<128, FA_FP32_D128_BM, FA_FP32_D128_BN, FA_FP32_D128_MIN_CTAS>(p, stream);
    return launch<256, 64, 32, 1>(p, stream);
}
