/*
 * naive.cu — unfused attention, the "why fused attention matters" baseline of the benchmark.
 *
 * Three plain kernels that materialise the (B, Hq, Nq, Nk) fp32 score matrix in a scratch
 * buffer the caller allocates (fa_naive_scratch_bytes()):
 *
 *     1. S = Q Kᵀ · scale          16 × 16 shared-memory tiles; causal entries j > i set to −inf
 *     2. P = softmax(S) in place   one CTA per row; lse = m + log Σ exp(S − m)
 *     3. O = P V                   16 × 16 shared-memory tiles, rounded to the dtype
 *
 * Every dtype (inputs converted to fp32, fp32 accumulation), every d, GQA, strides as in fa.h,
 * Nk ≥ 1. Written to be obviously correct, not fast: it moves 3 · Nq · Nk floats per head
 * through HBM where the fused kernels move none. Grids are 1-D over tiles with 64-bit indices,
 * so B · Hq beyond 65535 and scratch beyond 2^31 elements work.
 *
 *     nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -c csrc/cuda/naive.cu -Icsrc
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "families.h"
#include "dtype.cuh"

enum { TILE = 16, SOFTMAX_THREADS = 256 };

/* s: (B·Hq, Nq, Nk) fp32. One CTA of 16 × 16 threads per 16 × 16 tile of S. */
template <typename T>
__global__ void __launch_bounds__(TILE * TILE)
fa_naive_scores_kernel(const __grid_constant__ fa_params p, float *s)
{
    __shared__ float s_q[TILE][TILE + 1], s_k[TILE][TILE + 1];   /* +1: column reads hit distinct banks */
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t n_ti = (p.Nq + TILE - 1) / TILE, n_tj = (p.Nk + TILE - 1) / TILE;
    const int64_t n_tiles = p.B * p.Hq * n_ti * n_tj;
    for (int64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const int64_t bh = tile / (n_ti * n_tj), b = bh / p.Hq, h = bh % p.Hq;
        const int64_t hk = h / (p.Hq / p.Hkv);
        const int64_t i0 = tile / n_tj % n_ti * TILE, j0 = tile % n_tj * TILE;
        const T *q = (const T *)p.q + b * p.q_batch_stride + h * p.q_head_stride;
        const T *k = (const T *)p.k + b * p.k_batch_stride + hk * p.k_head_stride;
        const int64_t i = i0 + ty, j = j0 + tx;

        /* S[i][j] = Σ_c Q[i][c] K[j][c], 16 columns of Q and K at a time. */
        float acc = 0.0f;
        for (int64_t c0 = 0; c0 < p.d; c0 += TILE) {
            /* Row ty of the Q tile and row ty of the K tile, zero past the edges. */
            s_q[ty][tx] = i0 + ty < p.Nq && c0 + tx < p.d ? to_float(q[(i0 + ty) * p.q_row_stride + c0 + tx]) : 0.0f;
            s_k[ty][tx] = j0 + ty < p.Nk && c0 + tx < p.d ? to_float(k[(j0 + ty) * p.k_row_stride + c0 + tx]) : 0.0f;
            /* Both tiles are complete. */
            __syncthreads();
            for (int c = 0; c < TILE; c++) acc += s_q[ty][c] * s_k[tx][c];
            /* Everyone is done reading before the next columns overwrite the tiles. */
            __syncthreads();
        }
        if (i < p.Nq && j < p.Nk)
            s[(bh * p.Nq + i) * p.Nk + j] = p.causal && j > i ? -INFINITY : acc * p.scale;
    }
}

/* s: (B·Hq·Nq, Nk) fp32, rows replaced by their softmax; lse: (B·Hq·Nq) or NULL. */
__global__ void __launch_bounds__(SOFTMAX_THREADS)
fa_naive_softmax_kernel(float *s, float *lse, int64_t n_rows, int64_t Nk)
{
    __shared__ float s_red[SOFTMAX_THREADS / 32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int64_t row = blockIdx.x; row < n_rows; row += gridDim.x) {
        float *x = s + row * Nk;

        /* m = max_j S[j]: per thread, per warp (shuffles), per CTA (s_red). */
        float m = -INFINITY;
        for (int64_t j = threadIdx.x; j < Nk; j += blockDim.x) m = fmaxf(m, x[j]);
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (lane == 0) s_red[warp] = m;
        /* Every warp's max is in s_red. */
        __syncthreads();
        m = s_red[0];
        for (int w = 1; w < SOFTMAX_THREADS / 32; w++) m = fmaxf(m, s_red[w]);
        /* Everyone has read s_red before it is reused for the sum. */
        __syncthreads();

        /* l = Σ_j exp(S[j] − m); key 0 is always visible, so m is finite and l ≥ 1. */
        float l = 0.0f;
        for (int64_t j = threadIdx.x; j < Nk; j += blockDim.x) l += expf(x[j] - m);
        for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
        if (lane == 0) s_red[warp] = l;
        /* Every warp's sum is in s_red. */
        __syncthreads();
        l = 0.0f;
        for (int w = 0; w < SOFTMAX_THREADS / 32; w++) l += s_red[w];
        /* Everyone has read s_red before the next row reuses it. */
        __syncthreads();

        /* P[j] = exp(S[j] − m) / l */
        const float inv_l = 1.0f / l;
        for (int64_t j = threadIdx.x; j < Nk; j += blockDim.x) x[j] = expf(x[j] - m) * inv_l;
        if (lse != NULL && threadIdx.x == 0) lse[row] = m + logf(l);
    }
}

/* s: (B·Hq, Nq, Nk) fp32 probabilities. One CTA of 16 × 16 threads per 16 × 16 tile of O. */
template <typename T>
__global__ void __launch_bounds__(TILE * TILE)
fa_naive_pv_kernel(const __grid_constant__ fa_params p, const float *s)
{
    __shared__ float s_p[TILE][TILE], s_v[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t n_ti = (p.Nq + TILE - 1) / TILE, n_tc = (p.d + TILE - 1) / TILE;
    const int64_t n_tiles = p.B * p.Hq * n_ti * n_tc;
    for (int64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const int64_t bh = tile / (n_ti * n_tc), b = bh / p.Hq, h = bh % p.Hq;
        const int64_t hk = h / (p.Hq / p.Hkv);
        const int64_t i0 = tile / n_tc % n_ti * TILE, c0 = tile % n_tc * TILE;
        const float *pr = s + bh * p.Nq * p.Nk;
        const T *v = (const T *)p.v + b * p.v_batch_stride + hk * p.v_head_stride;
        const int64_t i = i0 + ty, c = c0 + tx;

        /* O[i][c] = Σ_j P[i][j] V[j][c], 16 keys at a time. */
        float acc = 0.0f;
        for (int64_t j0 = 0; j0 < p.Nk; j0 += TILE) {
            s_p[ty][tx] = i < p.Nq && j0 + tx < p.Nk ? pr[i * p.Nk + j0 + tx] : 0.0f;
            s_v[ty][tx] = j0 + ty < p.Nk && c < p.d ? to_float(v[(j0 + ty) * p.v_row_stride + c]) : 0.0f;
            /* Both tiles are complete. */
            __syncthreads();
            for (int j = 0; j < TILE; j++) acc += s_p[ty][j] * s_v[j][tx];
            /* Everyone is done reading before the next keys overwrite the tiles. */
            __syncthreads();
        }
        if (i < p.Nq && c < p.d) {
            T *o = (T *)p.o + b * p.o_batch_stride + h * p.o_head_stride;
            from_float(&o[i * p.o_row_stride + c], acc);
        }
    }
}

static unsigned grid_for(int64_t n)
{
    return (unsigned)(n < (int64_t)INT32_MAX ? n : INT32_MAX);
}

template <typename T>
static int launch(const fa_params *p, float *scratch, cudaStream_t stream)
{
    const dim3 tile_block(TILE, TILE);
    const int64_t n_ti = (p->Nq + TILE - 1) / TILE, bh = p->B * p->Hq;
    fa_naive_scores_kernel<T><<<grid_for(bh * n_ti * ((p->Nk + TILE - 1) / TILE)), tile_block, 0, stream>>>(*p, scratch);
    fa_naive_softmax_kernel<<<grid_for(bh * p->Nq), SOFTMAX_THREADS, 0, stream>>>(scratch, p->lse, bh * p->Nq, p->Nk);
    fa_naive_pv_kernel<T><<<grid_for(bh * n_ti * ((p->d + TILE - 1) / TILE)), tile_block, 0, stream>>>(*p, scratch);
    FA_CUDA_TRY(cudaGetLastError());
    return FA_OK;
}

extern "C" size_t fa_naive_scratch_bytes(const fa_params *p)
{
    return (size_t)(p->B * p->Hq * p->Nq * p->Nk) * sizeof(float);
}

/* scratch: at least fa_naive_scratch_bytes(p) bytes of device memory. */
extern "C" int fa_naive_forward(const fa_params *p, float *scratch, cudaStream_t stream)
{
    if (p->Nk == 0)
        return FA_ERR_UNSUPPORTED;   /* softmax of no keys: the dispatcher's other families answer */
    if (scratch == NULL)
        return FA_ERR_NULL_POINTER;
    switch (p->dtype) {
    case FA_FLOAT32:  return launch<float>(p, scratch, stream);
    case FA_FLOAT16:  return launch<__half>(p, scratch, stream);
    case FA_BFLOAT16: return launch<__nv_bfloat16>(p, scratch, stream);
    default:          return FA_ERR_DTYPE;
    }
}
