/*
 * simt.cu — FlashAttention forward on CUDA cores, fp32 arithmetic.
 *
 * The portable kernel: every dtype (fp32, fp16, bf16), every head dim 1..256,
 * any Nq, Nk (including 0), causal, GQA and strided inputs. A block of
 * WARPS warps owns BM = WARPS · ROWS query rows; each warp owns ROWS of them.
 * K and V are staged through shared memory BN = 32 keys at a time:
 *
 *     lane j:   s_j   = q_r · k_j · scale · log2(e)        (one key per lane; the scale in q
 *                                                         where |scale · log2 e| ≤ 1, else a power
 *                                                         of two of it in s_j: fa_q_multiplier)
 *     warp:     m_new = max(m_r, max_j s_j)                (shuffle reduction)
 *               p_j   = exp2(s_j − m_new)
 *               l_r   = l_r · exp2(m_r − m_new) + Σ_j p_j
 *     lane c:   O[r][c] = O[r][c] · exp2(m_r − m_new) + Σ_j p_j V[j][c]
 *
 * Lane c of the output owns columns c, c+32, ..., so accumulators stay in
 * registers for any d <= 256. The kernel is compiled for head dims up to DMAX = 64, 128
 * and 256; at 256 a block needs 82 KB of shared memory, more than Turing's 64 KB, so
 * there (KV_SHARED) V is loaded into K's buffer once the scores are done: one buffer
 * and one more barrier per block. It also runs on compute capability 7.0 (sm_70 code).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "dtype.cuh"
#include "families.h"
#include "softmax.cuh"

enum {
    WARPS = 4,
    ROWS = 4,                        /* query rows per warp */
    BM = WARPS * ROWS,               /* query rows per block */
    BN = 32,                         /* keys per shared-memory tile: one per lane */
};

/* Shared memory of one block. s_k rows are padded by one float so that lane j
 * reading row j, column c hits bank (j + c) % 32: no conflicts. Columns d..dp of
 * s_q and s_k hold zeros (dp = d rounded up to 4). KV_SHARED: V goes into s_k. */
template <int DMAX, bool KV_SHARED>
struct simt_smem {
    float s_q[BM][DMAX];             /* Q rows · q_mul */
    float s_k[BN][DMAX + 1];
    float s_v[KV_SHARED ? 1 : BN][DMAX];
};

__device__ __forceinline__ float warp_max(float x)
{
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

__device__ __forceinline__ float warp_sum(float x)
{
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* q, o: (B, Hq, Nq, d); k, v: (B, Hkv, Nk, d); strides from p. q_mul · s_mul = scale · log2(e):
 * Q's factor and the scores' (fa_q_multiplier). */
template <typename T, int DMAX, bool KV_SHARED>
__global__ void __launch_bounds__(WARPS * 32)
fa_simt_forward_kernel(const __grid_constant__ fa_params p, float q_mul, float s_mul)
{
    constexpr int DCOLS = DMAX / 32;     /* output columns per lane */
    extern __shared__ __align__(16) unsigned char smem_raw[];
    simt_smem<DMAX, KV_SHARED> &sm = *reinterpret_cast<simt_smem<DMAX, KV_SHARED> *>(smem_raw);
    const T *g_q = (const T *)p.q, *g_k = (const T *)p.k, *g_v = (const T *)p.v;
    T *g_o = (T *)p.o;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int d = (int)p.d;
    const int dp = (d + 3) & ~3;     /* d rounded up to the 4-term partial sums of S; <= DMAX */
    const int64_t n_qtiles = (p.Nq + BM - 1) / BM;
    const int64_t n_tiles = n_qtiles * p.B * p.Hq;

    for (int64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        /* Heaviest causal tiles (last query rows) first. */
        const int64_t i0 = (n_qtiles - 1 - tile % n_qtiles) * BM;
        const int64_t bh = tile / n_qtiles, b = bh / p.Hq, h = bh % p.Hq;
        const int64_t hk = h / (p.Hq / p.Hkv);
        const T *q = g_q + b * p.q_batch_stride + h * p.q_head_stride;
        const T *k = g_k + b * p.k_batch_stride + hk * p.k_head_stride;
        const T *v = g_v + b * p.v_batch_stride + hk * p.v_head_stride;

        /* s_q = Q[i0 : i0+BM] · q_mul, rows past Nq and columns d..dp zero. */
        for (int idx = threadIdx.x; idx < BM * dp; idx += blockDim.x) {
            const int r = idx / dp, c = idx % dp;
            sm.s_q[r][c] = i0 + r < p.Nq && c < d ? to_float(q[(i0 + r) * p.q_row_stride + c]) * q_mul : 0.0f;
        }

        float m_i[ROWS], l_i[ROWS], r_o[ROWS][DCOLS];
        for (int r = 0; r < ROWS; r++) {
            m_i[r] = -INFINITY;
            l_i[r] = 0.0f;
            for (int t = 0; t < DCOLS; t++) r_o[r][t] = 0.0f;
        }

        /* Top-left causal: the block's last row, i0 + BM − 1, sees keys < i0 + BM. */
        const int64_t j_end = p.causal && i0 + BM < p.Nk ? i0 + BM : p.Nk;
        for (int64_t j0 = 0; j0 < j_end; j0 += BN) {
            /* Previous tile's s_k / s_v reads (and s_q's writes) are done. */
            __syncthreads();
            for (int idx = threadIdx.x; idx < BN * dp; idx += blockDim.x) {
                const int j = idx / dp, c = idx % dp;
                const bool in = j0 + j < p.Nk && c < d;
                sm.s_k[j][c] = in ? to_float(k[(j0 + j) * p.k_row_stride + c]) : 0.0f;
                if (!KV_SHARED)
                    sm.s_v[j][c] = in ? to_float(v[(j0 + j) * p.v_row_stride + c]) : 0.0f;
            }
            /* The tile is in shared memory for every warp. */
            __syncthreads();

            /* s = q_r · k_lane, for this warp's ROWS rows. Each 4 products are summed on their
             * own and then added, so the full-size sum is rounded once per 4 terms: half the
             * rounding error of a term-by-term sum at large logits (same as fp32.cu). */
            float s[ROWS];
            for (int r = 0; r < ROWS; r++) s[r] = 0.0f;
            for (int c = 0; c < dp; c += 4) {
                const float k0 = sm.s_k[lane][c], k1 = sm.s_k[lane][c + 1];
                const float k2 = sm.s_k[lane][c + 2], k3 = sm.s_k[lane][c + 3];
                for (int r = 0; r < ROWS; r++) {
                    const float *q_r = &sm.s_q[warp * ROWS + r][c];
                    float s4 = q_r[0] * k0;
                    s4 = fmaf(q_r[1], k1, s4);
                    s4 = fmaf(q_r[2], k2, s4);
                    s4 = fmaf(q_r[3], k3, s4);
                    s[r] += s4;
                }
            }

            float p_r[ROWS];
            for (int r = 0; r < ROWS; r++) {
                const int64_t i = i0 + warp * ROWS + r, j = j0 + lane;
                const bool masked = j >= p.Nk || (p.causal && j > i);
                const float s_r = masked ? -INFINITY : s[r] * s_mul;
                /* m_new = max(m_i, rowmax(S)); a row with nothing visible yet keeps
                 * exp2 arguments finite by using 0 as its reference. */
                const float m_new = fmaxf(m_i[r], warp_max(s_r));
                const float m_ref = m_new == -INFINITY ? 0.0f : m_new;
                p_r[r] = exp2f(s_r - m_ref);
                const float alpha = exp2f(m_i[r] - m_ref);
                l_i[r] = l_i[r] * alpha + warp_sum(p_r[r]);
                m_i[r] = m_new;
                for (int t = 0; t < DCOLS; t++) r_o[r][t] *= alpha;
            }

            if (KV_SHARED) {
                /* Every warp is done with K; V takes its buffer. */
                __syncthreads();
                for (int idx = threadIdx.x; idx < BN * dp; idx += blockDim.x) {
                    const int j = idx / dp, c = idx % dp;
                    sm.s_k[j][c] = j0 + j < p.Nk && c < d ? to_float(v[(j0 + j) * p.v_row_stride + c]) : 0.0f;
                }
                __syncthreads();
            }

            /* O += P V: p_j broadcast from lane j, lane c reads V[j][c + 32t]. */
            const int n_keys = (int)(p.Nk - j0 < BN ? p.Nk - j0 : BN);
            for (int j = 0; j < n_keys; j++) {
                float pj[ROWS];
                for (int r = 0; r < ROWS; r++) pj[r] = __shfl_sync(0xffffffffu, p_r[r], j);
#pragma unroll
                for (int t = 0; t < DCOLS; t++) {
                    const int c = lane + 32 * t;
                    if (c < d) {
                        const float vc = KV_SHARED ? sm.s_k[j][c] : sm.s_v[j][c];
                        for (int r = 0; r < ROWS; r++) r_o[r][t] += pj[r] * vc;
                    }
                }
            }
        }

        /* O = O / l,  lse = (m + log2 l) · ln 2.  Nk == 0 leaves O = 0/0; write 0. */
        for (int r = 0; r < ROWS; r++) {
            const int64_t i = i0 + warp * ROWS + r;
            if (i >= p.Nq) continue;
            const float inv_l = p.Nk > 0 ? 1.0f / l_i[r] : 0.0f;
            T *o = g_o + b * p.o_batch_stride + h * p.o_head_stride + i * p.o_row_stride;
#pragma unroll
            for (int t = 0; t < DCOLS; t++) {
                const int c = lane + 32 * t;
                if (c < d) from_float(&o[c], r_o[r][t] * inv_l);
            }
            if (p.lse != NULL && lane == 0)
                p.lse[(b * p.Hq + h) * p.Nq + i] = (m_i[r] + log2f(l_i[r])) * 0.6931471805599453f;
        }
        /* s_q is rewritten by the next tile only after every warp read it. */
        __syncthreads();
    }
}

template <typename T, int DMAX, bool KV_SHARED>
static int launch(const fa_params *p, cudaStream_t stream)
{
    void (*kernel)(const fa_params, float, float) = fa_simt_forward_kernel<T, DMAX, KV_SHARED>;
    const size_t smem = sizeof(simt_smem<DMAX, KV_SHARED>);
    /* Opt in to > 48 KB of shared memory (per device, so on every launch). */
    if (smem > 48 * 1024)
        FA_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const int64_t n_tiles = (p->Nq + BM - 1) / BM * p->B * p->Hq;
    const unsigned grid = (unsigned)(n_tiles < (int64_t)INT32_MAX ? n_tiles : INT32_MAX);
    const float scale_log2 = p->scale * FA_LOG2E;
    kernel<<<grid, WARPS * 32, smem, stream>>>(*p, fa_q_multiplier(scale_log2), fa_score_multiplier(scale_log2));
    FA_CUDA_TRY(cudaGetLastError());
    return FA_OK;
}

/* The head-dim width: 64, 128 or 256, the last with V in K's buffer where 82 KB of shared memory
 * is more than the device lets a block have (Turing). */
template <typename T>
static int launch_d(const fa_params *p, cudaStream_t stream)
{
    if (p->d <= 64)
        return launch<T, 64, false>(p, stream);
    if (p->d <= 128)
        return launch<T, 128, false>(p, stream);
    int dev;
    fa_device info;
    const int st = fa_device_current(&dev, &info);
    if (st != FA_OK)
        return st;
    if (sizeof(simt_smem<256, false>) <= (size_t)info.smem_optin)
        return launch<T, 256, false>(p, stream);
    return launch<T, 256, true>(p, stream);
}

extern "C" int fa_simt_forward(const fa_params *p, cudaStream_t stream)
{
    switch (p->dtype) {
    case FA_FLOAT32:  return launch_d<float>(p, stream);
    case FA_FLOAT16:  return launch_d<__half>(p, stream);
    case FA_BFLOAT16: return launch_d<__nv_bfloat16>(p, stream);
    default:          return FA_ERR_DTYPE;
    }
}
