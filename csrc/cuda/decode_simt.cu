/*
 * decode_simt.cu — the CUDA-core kernels of the split-KV decode path (decode.cu has the tensor-core
 * attend kernel and the host planner; decode.cuh what they share):
 *
 *   1. append   k_new / v_new rows → cache rows cache_seqlens[b] ..  (only when Nnew > 0)
 *   2b. attend  fp32 (and fp16/bf16 under the simt family, or where the tensor-core tile finds no
 *               room): one warp per (query row, split), lanes over the head dim
 *   3. combine  per output row, merges the splits' partial O and lse
 *
 * Builds with plain nvcc: nvcc -std=c++17 -O3 -Icsrc -Icsrc/cuda -c csrc/cuda/decode_simt.cu
 */
#include "decode.cuh"

/* ---- 1. Append ------------------------------------------------------------------------------ */

/* cache[b, h, start_b + j] = new[b, h, j]; one warp per (b, h, j) row of k_new and v_new, grid
 * ceil(B·Hkv·Nnew / 4) × 128 threads. Writes nothing when any cache_seqlens entry is bad. */
__global__ void __launch_bounds__(128) fa_decode_append_kernel(const __grid_constant__ decode_args a)
{
    if (!seqlens_valid(a))
        return;
    const fa_params &p = a.kp.p;
    const int64_t row = (int64_t)blockIdx.x * 4 + threadIdx.x / 32;
    if (row >= p.B * p.Hkv * a.nnew)
        return;
    const int lane = threadIdx.x % 32;
    const int64_t j = row % a.nnew, h = row / a.nnew % p.Hkv, b = row / a.nnew / p.Hkv;
    const int64_t dst_row = seq_start(a, b) + j;
    const int64_t es = p.dtype == FA_FLOAT32 ? 4 : 2, bytes = p.d * es;
    for (int kv = 0; kv < 2; kv++) {
        const char *src = (const char *)(kv ? a.kp.v_new : a.kp.k_new) +
            (kv ? b * a.kp.vn_batch_stride + h * a.kp.vn_head_stride + j * a.kp.vn_row_stride
                : b * a.kp.kn_batch_stride + h * a.kp.kn_head_stride + j * a.kp.kn_row_stride) * es;
        char *dst = (char *)(kv ? p.v : p.k) +
            (kv ? b * p.v_batch_stride + h * p.v_head_stride + dst_row * p.v_row_stride
                : b * p.k_batch_stride + h * p.k_head_stride + dst_row * p.k_row_stride) * es;
        if (a.vec_append)
            for (int64_t c = 16 * lane; c < bytes; c += 16 * 32)
                *(uint4 *)(dst + c) = *(const uint4 *)(src + c);
        else   /* every dtype is a whole number of 2-byte units */
            for (int64_t c = 2 * lane; c < bytes; c += 2 * 32)
                *(uint16_t *)(dst + c) = *(const uint16_t *)(src + c);
    }
}

/* ---- 2b. Attend on CUDA cores (fp32, and the fallback) -------------------------------------- */

/* One warp per (output row, split), split fastest; lane owns columns lane + 32e, e < 8. Four keys
 * per step: their loads and dot-product reductions overlap. Grid ceil(rows · splits / 4) × 128. */
template <typename T>
__global__ void __launch_bounds__(128, 2) fa_decode_simt_attend_kernel(const __grid_constant__ decode_args a)
{
    const bool valid = seqlens_valid(a);
    const fa_params &p = a.kp.p;
    const int64_t wid = (int64_t)blockIdx.x * 4 + threadIdx.x / 32;
    if (wid >= a.rows * a.splits)
        return;
    const int lane = threadIdx.x % 32, d = (int)p.d;
    const int64_t split = wid % a.splits, row = wid / a.splits;
    const int64_t i = row % p.Nq, h = row / p.Nq % p.Hq, b = row / p.Nq / p.Hq, hk = h / a.G;
    const int64_t L = valid ? seq_start(a, b) + a.nnew : 0;
    const int64_t lim = p.causal ? L - p.Nq + i + 1 : L;    /* keys j < lim are seen */
    const int64_t k0 = split * a.chunk, k1 = min(lim, k0 + a.chunk);

    /* q · q_mul, fp32 (c = scale · log2(e) = q_mul · s_mul: fa_q_multiplier); g_k, g_v: k[b, hk],
     * v[b, hk] (Nmax, d) */
    const float q_mul = fa_q_multiplier(a.scale_log2), s_mul = fa_score_multiplier(a.scale_log2);
    const T *g_q = (const T *)p.q + b * p.q_batch_stride + h * p.q_head_stride + i * p.q_row_stride;
    const T *g_k = (const T *)p.k + b * p.k_batch_stride + hk * p.k_head_stride;
    const T *g_v = (const T *)p.v + b * p.v_batch_stride + hk * p.v_head_stride;
    float r_q[8], r_o[8];
#pragma unroll
    for (int e = 0; e < 8; e++) {
        r_q[e] = lane + 32 * e < d ? to_float(g_q[lane + 32 * e]) * q_mul : 0.f;
        r_o[e] = 0.f;
    }
    float m_i = -INFINITY, l_i = 0.f;

    for (int64_t j = k0; j < k1; j += 4) {
        /* s_u = q · k_(j+u) · c (log2 units), −inf past k1 */
        float r_k[4][8], r_v[4][8], s[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
#pragma unroll
            for (int e = 0; e < 8; e++) {
                const bool in = j + u < k1 && lane + 32 * e < d;
                r_k[u][e] = in ? to_float(g_k[(j + u) * p.k_row_stride + lane + 32 * e]) : 0.f;
                r_v[u][e] = in ? to_float(g_v[(j + u) * p.v_row_stride + lane + 32 * e]) : 0.f;
            }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            s[u] = 0.f;
#pragma unroll
            for (int e = 0; e < 8; e++)
                s[u] = fmaf(r_q[e], r_k[u][e], s[u]);
        }
#pragma unroll
        for (int off = 16; off >= 1; off /= 2)
#pragma unroll
            for (int u = 0; u < 4; u++)
                s[u] += __shfl_xor_sync(0xffffffffu, s[u], off);
        float m_new = m_i;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            s[u] = j + u < k1 ? s[u] * s_mul : -INFINITY;
            m_new = fmaxf(m_new, s[u]);
        }
        /* alpha = exp2(m_i − m_new); O = O·alpha + Σ P V; l = l·alpha + Σ P (m_new is finite: key
         * j < k1 is seen) */
        const float alpha = exp2f(m_i - m_new);
        l_i *= alpha;
#pragma unroll
        for (int e = 0; e < 8; e++)
            r_o[e] *= alpha;
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const float pu = exp2f(s[u] - m_new);
            l_i += pu;
#pragma unroll
            for (int e = 0; e < 8; e++)
                r_o[e] = fmaf(pu, r_v[u][e], r_o[e]);
        }
        m_i = m_new;
    }

    /* l_i = 0: the split saw no key (0, lse −inf); NaN (a NaN score, or +inf: inf − inf) stays NaN
     * in O and lse, so that the combine makes the row NaN. */
    const float lse2 = valid ? (l_i == 0.f ? -INFINITY : m_i + log2f(l_i)) : NAN;
#pragma unroll
    for (int e = 0; e < 8; e++)
        if (lane + 32 * e < d)
            store_result<T>(a, split, row, b, h, i, lane + 32 * e,
                            valid ? (l_i == 0.f ? 0.f : r_o[e] / l_i) : NAN, lse2);
}

/* ---- 3. Combine ----------------------------------------------------------------------------- */


/* O = Σ_s O_s · w_s / l, w_s = exp2(lse_s − M), l = Σ_s w_s, M = max_s lse_s. Splits that saw no
 * key have lse −inf and O 0: weight 0. A split's lse is NaN where it met a NaN score, and a bad
 * cache_seqlens entry makes the attend kernels write NaN for every split's lse; the row's output
 * is then NaN, so the combine kernels need no load of cache_seqlens of their own.
 *
 * Few splits (up to 24): one thread per output element, tpr = combine_tpr(d) threads per row
 * (two elements per thread above d = 128), 128 / tpr rows per CTA. A thread loads the lse
 * and O of 8 splits at once and merges them into a running (M, l, O) as the attend kernel does, so
 * up to 8 splits cost one memory latency, and each thread's chain of instructions stays short.
 * H200, B = 1 H 32/32 32k, 4 splits (CUPTI): 1.8 µs against 3.4 for one warp per row walking its
 * splits and columns (~950 instructions per warp at ~7 cycles each, ncu) and 2.0 for cuDNN's
 * reduction (bench/LOG.md, 2026-11-30). */
template <typename T, bool SINKS = false>
__global__ void __launch_bounds__(128) fa_decode_combine_kernel(const __grid_constant__ decode_args a)
{
    const fa_params &p = a.kp.p;
    const int d = (int)p.d, splits = (int)a.splits;
    const int tpr = combine_tpr(d), col = threadIdx.x % tpr;
    const int64_t row = (int64_t)blockIdx.x * (128 / tpr) + threadIdx.x / tpr;
    if (row >= a.rows)
        return;
    const bool one = col < d, two = col + tpr < d;     /* two: d > 128, a second element */
    const int64_t stride = a.rows * d;                  /* from one split's partial O to the next */
    const float *lse = a.lse_part + row, *o = a.o_part + row * d + col;   /* split 0's */

    float M = -INFINITY, l = 0.f, acc0 = 0.f, acc1 = 0.f;
    bool nan_lse = false;
    for (int s0 = 0; s0 < splits; s0 += 8) {
        float x[8], y0[8], y1[8];
#pragma unroll
        for (int u = 0; u < 8; u++) {                   /* pointers stepped, not recomputed */
            const bool in = s0 + u < splits;
            x[u] = in ? *lse : -INFINITY;
            y0[u] = in && one ? o[0] : 0.f;
            y1[u] = in && two ? o[tpr] : 0.f;
            lse += a.rows;
            o += stride;
        }
        float M_new = M;
#pragma unroll
        for (int u = 0; u < 8; u++) {
            nan_lse |= isnan(x[u]);
            M_new = fmaxf(M_new, x[u]);
        }
        if (M_new == -INFINITY)                         /* no key in any split so far */
            continue;
        const float alpha = ex2(M - M_new);             /* M = −inf: 0 */
        l *= alpha;
        acc0 *= alpha;
        acc1 *= alpha;
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const float w = ex2(x[u] - M_new);          /* −inf: 0 */
            l += w;
            acc0 = fmaf(w, y0[u], acc0);
            acc1 = fmaf(w, y1[u], acc1);
        }
        M = M_new;
    }
    const bool valid = !nan_lse;
    float inv_l = l > 0.f ? 1.f / l : 0.f;
    int64_t i, h, b;                                    /* row = (b·Hq + h)·Nq + i */
    if (a.rows <= INT32_MAX) {                          /* 32-bit divisions: a short chain */
        const uint32_t r = (uint32_t)row, nq = (uint32_t)p.Nq, hq = (uint32_t)p.Hq;
        i = r % nq, h = r / nq % hq, b = r / nq / hq;
    } else {
        i = row % p.Nq, h = row / p.Nq % p.Hq, b = row / p.Nq / p.Hq;
    }
    float lse2 = 0.f;
    if constexpr (SINKS)                                /* the sink joins the denominator */
        fa_row_end(M, l, 1, a.v.sinks[h] * FA_LOG2E, &inv_l, &lse2);
    T *g_o = (T *)p.o + b * p.o_batch_stride + h * p.o_head_stride + i * p.o_row_stride + col;
    if (one)
        from_float(g_o, valid ? acc0 * inv_l : NAN);
    if (two)
        from_float(g_o + tpr, valid ? acc1 * inv_l : NAN);
    if (p.lse != NULL && col == 0)
        /* fa_split_lse written out: through the function this kernel's PTX changes (not yet timed). */
        p.lse[row] = SINKS ? (valid ? lse2 * FA_LN2 : NAN)
                           : valid ? (l > 0.f ? (M + log2f(l)) * FA_LN2 : -INFINITY) : NAN;
}

/* Many splits (more than 24): four warps per output row, one row per CTA. Lane j reads the lse of
 * splits j, j + 32, ... at once and keeps their weights; the O loop then takes each split's weight
 * by a shuffle and issues 8 splits' loads per step, the row's warps taking every fourth group of
 * 8, so a row costs a few memory latencies, not one per split. The warps' sums meet in shared
 * memory. */
/* (128, 1): with (128) alone ptxas held it to 128 registers and spilled. */
template <typename T, bool SINKS = false>
__global__ void __launch_bounds__(128, 1) fa_decode_combine_wide_kernel(const __grid_constant__ decode_args a)
{
    enum { MAX_PASSES = 8, WPR = 4 };                   /* weights kept for up to 256 splits */
    __shared__ float s_red[3][256];                     /* warps 1-3's partial O */
    const fa_params &p = a.kp.p;
    const int phase = threadIdx.x / 32;
    const int64_t row = blockIdx.x;
    const int lane = threadIdx.x % 32, d = (int)p.d, splits = (int)a.splits;
    const int64_t i = row % p.Nq, h = row / p.Nq % p.Hq, b = row / p.Nq / p.Hq;
    const float *lse = a.lse_part + row;                /* split s at lse[s · rows] */

    /* Partial O of splits sp0..sp0+7 (zero past the last split and past d). */
    const float *o = a.o_part + row * d;                /* split s at o[s · rows · d] */
    float x[8][8];
    auto load_group = [&](int sp0) {
#pragma unroll
        for (int u = 0; u < 8; u++)
#pragma unroll
            for (int e = 0; e < 8; e++)
                x[u][e] = sp0 + u < splits && lane + 32 * e < d
                        ? o[(int64_t)(sp0 + u) * a.rows * d + lane + 32 * e] : 0.f;
    };
    /* The warp's first group of O loads goes out with the lse loads: one memory latency, not two. */
    load_group(8 * phase);

    float w[MAX_PASSES], M = -INFINITY;
    bool nan_lse = false;
#pragma unroll
    for (int k = 0; k < MAX_PASSES; k++) {
        w[k] = 32 * k + lane < splits ? lse[(32 * k + lane) * a.rows] : -INFINITY;
        M = fmaxf(M, w[k]);
        nan_lse |= isnan(w[k]);
    }
    for (int sp = 32 * MAX_PASSES + lane; sp < splits; sp += 32) {   /* beyond 256 splits */
        M = fmaxf(M, lse[sp * a.rows]);
        nan_lse |= isnan(lse[sp * a.rows]);
    }
    const bool valid = !__any_sync(0xffffffffu, nan_lse);
#pragma unroll
    for (int off = 16; off >= 1; off /= 2)
        M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, off));
    const float Mr = M == -INFINITY ? 0.f : M;          /* no split saw a key: every weight 0 */
    float l = 0.f;
#pragma unroll
    for (int k = 0; k < MAX_PASSES; k++) {
        w[k] = ex2(w[k] - Mr);
        l += w[k];
    }
    for (int sp = 32 * MAX_PASSES + lane; sp < splits; sp += 32)
        l += ex2(lse[sp * a.rows] - Mr);
#pragma unroll
    for (int off = 16; off >= 1; off /= 2)
        l += __shfl_xor_sync(0xffffffffu, l, off);

    float r_o[8] = {};
    for (int sp0 = 8 * phase; sp0 < splits; sp0 += 8 * WPR) {
        if (sp0 != 8 * phase)
            load_group(sp0);
        float wk = w[0];                                /* splits sp0..sp0+7 are in pass sp0 / 32 */
#pragma unroll
        for (int k = 1; k < MAX_PASSES; k++)
            wk = sp0 >= 32 * k ? w[k] : wk;
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int sp = sp0 + u;
            float wu = __shfl_sync(0xffffffffu, wk, sp % 32);   /* the weight lane sp % 32 holds */
            if (sp >= 32 * MAX_PASSES)
                wu = sp < splits ? ex2(lse[sp * a.rows] - Mr) : 0.f;
#pragma unroll
            for (int e = 0; e < 8; e++)
                r_o[e] = fmaf(wu, x[u][e], r_o[e]);
        }
    }
    /* The row's sum in warp 0. */
    if (phase > 0)
#pragma unroll
        for (int e = 0; e < 8; e++)
            if (lane + 32 * e < d)
                s_red[phase - 1][lane + 32 * e] = r_o[e];
    /* Barrier: the three partial sums are in shared memory. */
    __syncthreads();
    if (phase > 0)
        return;
#pragma unroll
    for (int e = 0; e < 8; e++)
        if (lane + 32 * e < d)
            r_o[e] += s_red[0][lane + 32 * e] + s_red[1][lane + 32 * e] + s_red[2][lane + 32 * e];
    T *g_o = (T *)p.o + b * p.o_batch_stride + h * p.o_head_stride + i * p.o_row_stride;
    float mul = 0.f, lse2 = 0.f;
    if constexpr (SINKS)                                /* the sink joins the denominator */
        fa_row_end(M, l, 1, a.v.sinks[h] * FA_LOG2E, &mul, &lse2);
#pragma unroll
    for (int e = 0; e < 8; e++)
        if (lane + 32 * e < d)
            from_float(g_o + lane + 32 * e, valid ? (SINKS ? r_o[e] * mul : l > 0.f ? r_o[e] / l : 0.f) : NAN);
    if (p.lse != NULL && lane == 0)
        /* as in fa_decode_combine_kernel: fa_split_lse written out */
        p.lse[row] = SINKS ? (valid ? lse2 * FA_LN2 : NAN)
                           : valid ? (l > 0.f ? (M + log2f(l)) * FA_LN2 : -INFINITY) : NAN;
}

/* ---- Kernel pointers for decode.cu ----------------------------------------------------------- */

decode_kernel decode_append_kernel_ptr(void)
{
    return fa_decode_append_kernel;
}

template <typename T>
static decode_simt_kernels kernels_for(void)
{
    return {fa_decode_simt_attend_kernel<T>, fa_decode_combine_kernel<T>, fa_decode_combine_wide_kernel<T>,
            fa_decode_combine_kernel<T, true>, fa_decode_combine_wide_kernel<T, true>};
}

decode_simt_kernels decode_simt_kernels_for(fa_dtype dtype)
{
    return dtype == FA_FLOAT32 ? kernels_for<float>() : dtype == FA_FLOAT16 ? kernels_for<__half>()
                                                                            : kernels_for<__nv_bfloat16>();
}
