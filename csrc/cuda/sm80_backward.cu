/*
 * sm80_backward.cu — FlashAttention-2 backward for fp16 and bf16 on tensor cores (sm_80 and later).
 *
 * Three kernels on the caller's stream, through a workspace of fp32 (fa_backward_workspace_bytes):
 * backward_rows.cuh's prep and dq kernels around this file's main one.
 *
 *   prep      per query row: D, lse₂, the row's dQ accumulator zeroed, the sinks' gradient
 *   main      one CTA per (b, kv head, block of BN keys) walks every query block of every query
 *             head of its group that sees one of its keys, with P recomputed from lse:
 *                 Sᵀ = K Qᵀ,  Pᵀ = exp2(Sᵀ · scale · log2 e − lse₂)
 *                 dPᵀ = V dOᵀ,  dSᵀ = Pᵀ ∘ (dPᵀ − D)
 *                 dV += Pᵀ dO,  dK += dSᵀ Q                       in registers, summed over the group
 *                 dQ += dS K                                        fp32 atomics into the accumulator
 *   dq        dQ = scale · accumulator, rounded to the output
 *
 * Each of the WARPS = BN / 16 warps owns 16 keys: its Sᵀ and dPᵀ (16 keys × BM queries) are C
 * fragments whose registers are already the A fragments of Pᵀ and dSᵀ for dV and dK (as sm80.cu's
 * P for P V). dSᵀ goes through shared memory for dQ, where each warp takes 16 queries and
 * D · (BM / 16) / WARPS columns. Q and dO blocks are double-buffered through cp.async: block
 * it + 1 lands while block it is computed. Shared tiles are swizzled as in sm80.cu.
 *
 * Variants: the alignment, the window (causal is a window with right = 0), softcap, ALiBi,
 * key_mask, sinks and packed sequences; an attn_mask tensor is FA_ERR_UNSUPPORTED. With a softcap,
 * dSᵀ also takes the cap's derivative 1 − tanh², tanh recovered from P itself (below). Packed
 * sequences take the grid of the longest; the workspace holds each head's packed rows plus BM
 * rows of slack, so a sequence's last query block stays inside its head. Reached through
 * fa_backward_cuda() (dispatch.cu). D reads the output rounded to its dtype, as
 * FlashAttention-2/3 do (tests/test_backward.py's bound says what that costs).
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "families.h"
#include "dtype.cuh"
#include "ptx.cuh"
#include "softmax.cuh"
#include "variants.cuh"
#include "backward_rows.cuh"

/* A tile shape: D the compiled head-dim width; BN keys per CTA, 16 per warp; BM queries per step;
 * dQ = dS K is split over the warps as BM / 16 query groups × the rest of the warps over D. */
template <int D_, int BN_, int BM_, int MIN_CTAS_>
struct bwd_tile {
    static constexpr int D = D_, BN = BN_, BM = BM_, WARPS = BN_ / 16, THREADS = 32 * WARPS, MIN_CTAS = MIN_CTAS_;
    static constexpr int QG = BM / 16, DQ_COLS = D * QG / WARPS;
    static_assert(D % 64 == 0 && BN % 16 == 0 && BM % 64 == 0 && WARPS % QG == 0 && DQ_COLS % 16 == 0, "tile shape");
};

/* 128 keys (8 warps) per CTA: 64-key blocks at 2 CTAs per SM were 9 % slower at d = 128, 16k (twice the
 * dQ reductions; bench/LOG.md 2026-12-02-backward). Shared memory: (2·BN + 4·BM) · D · 2 + BN · BM · 2
 * bytes (+ 1 KB): 80 KB at d = 64, 144 KB at d = 128 (sm_80 and sm_90 opt in to 163 and 227 KB; 8.6/8.9's
 * 99 KB take d = 64 only, and d = 128 there is computed exactly). */
typedef bwd_tile< 64, 128, 64, 1> bwd_tile_d64;
typedef bwd_tile<128, 128, 64, 1> bwd_tile_d128;

/* Adds a warp's dQ C fragments (16 rows × 8·N columns at acc, row stride ld floats; this lane's
 * rows g, g + 8, columns 2t, 2t + 1 of each 8) into device memory: one red.v2 per pair on sm_90
 * (+20 % over scalar atomics at d = 128, 16k; lanes swapping pairs for a red.v4 each was 4 % slower,
 * bench/LOG.md 2026-12-02-backward), else one atomicAdd per element. */
template <int N>
__device__ __forceinline__ void red_add_dq(float *acc, int ld, const float (&r)[N][4], int g, int t)
{
#pragma unroll
    for (int n = 0; n < N; n++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float *p = acc + (g + 8 * h) * ld + 8 * n + 2 * t;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
            asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" :: "l"(p), "f"(r[n][2 * h]), "f"(r[n][2 * h + 1])
                         : "memory");
#else
            atomicAdd(p, r[n][2 * h]);
            atomicAdd(p + 1, r[n][2 * h + 1]);
#endif
        }
}

template <typename T, class C>
struct bwd_smem {
    T k[C::BN][C::D];                /* K block; at the end, this CTA's dK staged for the stores */
    T v[C::BN][C::D];                /* V block; at the end, dV */
    T q[2][C::BM][C::D];             /* Q blocks, double-buffered */
    T dO[2][C::BM][C::D];            /* dO blocks, same stage as Q */
    T ds[C::BN][C::BM];              /* dSᵀ of the current step, swizzled BM columns wide */
    float lse2[2][C::BM];
    float dd[2][C::BM];
};

/* ---- Kernels ------------------------------------------------------------------------------- */

/* acc += X Rᵀ over columns 16kk..16kk + 15, for the 16 rows x_row.. of X (the warp's keys of K or V,
 * swizzled at s_x) against the BM rows of R (Q or dO at s_rows), whose rows are the n index. */
template <typename T, int D, int BM>
__device__ __forceinline__ void keys_by_cols_step(float (&acc)[BM / 8][4], uint32_t s_x, uint32_t s_rows, int x_row,
                                                  int kk, uint32_t lane_off, uint32_t lane_off_n)
{
    uint32_t r_a[4], r_b[4];
    ldsm_x4(r_a, frag_addr<D>(s_x, lane_off, x_row, 2 * kk));
#pragma unroll
    for (int np = 0; np < BM / 16; np++) {
        ldsm_x4(r_b, frag_addr<D>(s_rows, lane_off_n, 16 * np, 2 * kk));
        mma16816<T>(acc[2 * np], r_a, r_b[0], r_b[1]);
        mma16816<T>(acc[2 * np + 1], r_a, r_b[2], r_b[3]);
    }
}

/* acc += Xᵀ R for this warp's 16 keys: X's C fragments x (16 keys × BM queries: Pᵀ or dSᵀ) are, two
 * n-tiles at a time, the A fragments of queries 16kk..; R (BM rows × D, the swizzled tile at s_rows)
 * has its rows as the k index (ldmatrix.trans). STORE: X's packed rows also go to the BM-wide swizzled
 * tile at s_x (this lane's rows row and row + 8, columns 2t, 2t + 1 of each 8), for dQ. */
template <typename T, int D, int BM, bool STORE>
__device__ __forceinline__ void keys_by_rows(float (&acc)[D / 8][4], const float (&x)[BM / 8][4], uint32_t s_rows,
                                             uint32_t lane_off, uint32_t s_x, int row, int t)
{
#pragma unroll
    for (int kk = 0; kk < BM / 16; kk++) {
        const uint32_t r_a[4] = {pack2<T>(x[2 * kk][0], x[2 * kk][1]), pack2<T>(x[2 * kk][2], x[2 * kk][3]),
                                 pack2<T>(x[2 * kk + 1][0], x[2 * kk + 1][1]), pack2<T>(x[2 * kk + 1][2], x[2 * kk + 1][3])};
        if (STORE) {
            st_shared_u32(s_x + swz<BM>(row, 2 * kk) + 4 * t, r_a[0]);
            st_shared_u32(s_x + swz<BM>(row + 8, 2 * kk) + 4 * t, r_a[1]);
            st_shared_u32(s_x + swz<BM>(row, 2 * kk + 1) + 4 * t, r_a[2]);
            st_shared_u32(s_x + swz<BM>(row + 8, 2 * kk + 1) + 4 * t, r_a[3]);
        }
#pragma unroll
        for (int n2 = 0; n2 < D / 16; n2++) {
            uint32_t r_b[4];
            ldsm_x4_trans(r_b, frag_addr<D>(s_rows, lane_off, 16 * kk, 2 * n2));
            mma16816<T>(acc[2 * n2], r_a, r_b[0], r_b[1]);
            mma16816<T>(acc[2 * n2 + 1], r_a, r_b[2], r_b[3]);
        }
    }
}

/* Grid: 1-D, one CTA per (b·Hkv + kv head, key block); block: C::WARPS warps. VAR: the variants
 * beyond the window and sinks (softcap, ALiBi, key_mask, packed sequences); without them the
 * kernel keeps the registers they would take (d = 128 would spill). */
template <typename T, class C, bool VAR>
__global__ void __launch_bounds__(C::THREADS, C::MIN_CTAS)
fa_sm80_backward_kernel(const __grid_constant__ bwd_args a)
{
    constexpr int D = C::D, BN = C::BN, BM = C::BM, THREADS = C::THREADS;
    extern __shared__ __align__(128) uint8_t smem_raw[];
    bwd_smem<T, C> &s = *reinterpret_cast<bwd_smem<T, C> *>(smem_raw);

    const fa_backward_params &bp = a.bp;
    const fa_params &p = bp.p;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane / 4, t = lane % 4;               /* fragment row group, column pair */
    const int left = a.left, right = a.right;

    /* CTA → (b, kv head, key block): a head's blocks are consecutive; causal (top-left or
     * bottom-right) makes the first ones the heaviest. */
    const int64_t blk = a.first_block + blockIdx.x;
    const int kb = (int)(blk % a.n_k_blocks);
    const int64_t bhk = blk / a.n_k_blocks, b = bhk / p.Hkv, hk = bhk % p.Hkv;
    if (VAR && !bwd_seqlens_ok<THREADS>(a)) {
        bwd_fill_nan<T, THREADS>(bp.dk, a.var.v.total_k, p.Hkv, bp.dk_row_stride, bp.dk_head_stride, (int)p.d, blk,
                                 a.n_blocks);
        bwd_fill_nan<T, THREADS>(bp.dv, a.var.v.total_k, p.Hkv, bp.dv_row_stride, bp.dv_head_stride, (int)p.d, blk,
                                 a.n_blocks);
        return;
    }
    /* This CTA's sequence (packed: rows q0.. of q, k0.. of k; past its keys, nothing to do). */
    const fa_var_seq sq = VAR ? var_seq(a.var, p, b) : var_whole(a.var, p);
    const int d = (int)p.d, Nq = sq.Nq, Nk = sq.Nk, delta = sq.delta;
    const int n0 = kb * BN, n1 = min(n0 + BN, Nk);
    if (VAR && n0 >= Nk)
        return;

    /* key_mask: whether each of this thread's keys (C rows g, g + 8 of its warp's 16) takes part,
     * and whether all or none of the warp's do; a CTA none of whose keys takes part has dK = dV = 0. */
    bool kvis[2] = {true, true};
    if (VAR && a.var.v.key_mask != NULL) {
        const uint8_t *km = a.var.v.key_mask + b * a.var.v.key_mask_batch_stride;
        for (int r = 0; r < 2; r++) {
            const int j = n0 + 16 * warp + g + 8 * r;
            kvis[r] = j < Nk && km[j] != 0;
        }
    }
    const bool warp_any = !VAR || __any_sync(0xffffffffu, kvis[0] || kvis[1]);
    const bool warp_all = !VAR || __all_sync(0xffffffffu, kvis[0] && kvis[1]);
    /* Barrier (__syncthreads_or): every warp's answer is in. */
    const bool cta_any = !VAR || __syncthreads_or(warp_any);

    /* The queries that see one of keys n0..n1−1, as query blocks qb_lo..; each of the G heads of
     * the group walks them: step it is head it / n_qb, query block qb_lo + it % n_qb. */
    const int q_lo = max(0, n0 - delta - right), q_hi = min(Nq - 1, n1 - 1 - delta + left);
    const int qb_lo = q_lo / BM, n_qb = q_lo <= q_hi && cta_any ? q_hi / BM - qb_lo + 1 : 0;
    const int G = (int)a.q_per_kv, n_it = G * n_qb;

    const uint16_t *g_k = (const uint16_t *)p.k + b * p.k_batch_stride + hk * p.k_head_stride
                        + (sq.k0 + n0) * p.k_row_stride;
    const uint16_t *g_v = (const uint16_t *)p.v + b * p.v_batch_stride + hk * p.v_head_stride
                        + (sq.k0 + n0) * p.v_row_stride;
    if (n_it > 0) {                                     /* else dK = dV = 0: nothing to load */
        load_tile<BN, D, THREADS, true>(smem_u32(s.k), g_k, p.k_row_stride, Nk - n0, d, a.vec_load);
        load_tile<BN, D, THREADS, true>(smem_u32(s.v), g_v, p.v_row_stride, Nk - n0, d, a.vec_load);
    }

    /* Issues the loads of step it into stage st: Q and dO rows i0.., their lse₂ and D (packed
     * rows of the workspace need not be 16-byte aligned: one float per copy). */
    auto load_step = [&](int st, int it) {
        const int64_t h = hk * G + it / n_qb;
        const int i0 = (qb_lo + it % n_qb) * BM;
        const int64_t qrow = sq.q0 + i0;
        const uint16_t *g_q = (const uint16_t *)p.q + b * p.q_batch_stride + h * p.q_head_stride + qrow * p.q_row_stride;
        const uint16_t *g_do = (const uint16_t *)bp.dout + b * bp.do_batch_stride + h * bp.do_head_stride
                             + qrow * bp.do_row_stride;
        load_tile<BM, D, THREADS, true>(smem_u32(s.q[st]), g_q, p.q_row_stride, Nq - i0, d, a.vec_load);
        load_tile<BM, D, THREADS, true>(smem_u32(s.dO[st]), g_do, bp.do_row_stride, Nq - i0, d, a.vec_load);
        const int64_t row = bwd_row<VAR>(a, sq, b, h, i0);
        if (VAR && a.packed) {
            if (threadIdx.x < BM)
                cp_async4(smem_u32(&s.lse2[st][threadIdx.x]), a.lse2 + row + threadIdx.x, 4);
            else if (threadIdx.x < 2 * BM)
                cp_async4(smem_u32(&s.dd[st][threadIdx.x - BM]), a.dd + row + threadIdx.x - BM, 4);
        } else if (threadIdx.x < BM / 4) {
            cp_async16_full(smem_u32(&s.lse2[st][4 * threadIdx.x]), a.lse2 + row + 4 * threadIdx.x);
        } else if (threadIdx.x < BM / 2) {
            cp_async16_full(smem_u32(&s.dd[st][4 * (threadIdx.x - BM / 4)]), a.dd + row + 4 * (threadIdx.x - BM / 4));
        }
    };
    if (n_it > 0)
        load_step(0, 0);
    cp_async_commit();

    /* ldmatrix lane offsets (sm80.cu): A fragments and trans B fragments from row-major tiles;
     * B fragments from rows that are the n index; A fragments of dS from dSᵀ (trans). */
    const uint32_t lane_off = swz<D>(lane % 16, lane / 16);
    const uint32_t lane_off_n = swz<D>(lane % 8 + 8 * (lane / 16), (lane / 8) % 2);
    const uint32_t lane_off_ds = swz<BM>(lane % 8 + 8 * (lane / 16), (lane / 8) % 2);
    const uint32_t s_k = smem_u32(s.k), s_v = smem_u32(s.v), s_ds = smem_u32(s.ds);
    const int key_w = n0 + 16 * warp;                   /* this warp's first key */
    const int key_r[2] = {key_w + g, key_w + g + 8};    /* this thread's keys: C rows g, g + 8 */

    float r_dk[D / 8][4] = {}, r_dv[D / 8][4] = {};     /* this warp's 16 keys × D, C layout */

    for (int it = 0; it < n_it; it++) {
        const int st = it & 1;
        cp_async_wait<0>();
        /* Barrier: step it's tiles (and K, V) are visible; every warp has finished step it − 1,
         * whose stage the loads below overwrite and whose dSᵀ this step overwrites. */
        __syncthreads();
        if (it + 1 < n_it)
            load_step(st ^ 1, it + 1);
        cp_async_commit();

        const int64_t h = hk * G + it / n_qb;
        const int i0 = (qb_lo + it % n_qb) * BM;
        const uint32_t s_q = smem_u32(s.q[st]), s_do = smem_u32(s.dO[st]);

        /* This warp's keys against the step's queries: all hidden, all visible, or mixed (each
         * pair checked: the window, key_mask, j < Nk and, packed, i < Nq; unpacked query rows
         * past Nq have lse₂ = +inf, so their P is 0). */
        const int key_last = key_w + 15, i_last = i0 + BM - 1;
        const bool none = !warp_any || key_w >= Nk || key_last < i0 + delta - left || key_w > i_last + delta + right;
        const bool full = warp_all && key_last < Nk && (!VAR || i_last < Nq) && key_w >= i_last + delta - left
                       && key_last <= i0 + delta + right;
        if (!none) {
            /* Sᵀ = K Qᵀ and dPᵀ = V dOᵀ: 16 keys × BM queries; Q and dO rows are the n index. */
            float r_s[BM / 8][4] = {}, r_dp[BM / 8][4] = {};
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                keys_by_cols_step<T, D, BM>(r_s, s_k, s_q, 16 * warp, kk, lane_off, lane_off_n);
                keys_by_cols_step<T, D, BM>(r_dp, s_v, s_do, 16 * warp, kk, lane_off, lane_off_n);
            }

            /* Pᵀ = exp2(score − lse₂) on visible pairs, else 0, the score in log2 units as the
             * forward has it: scale · q·k, or softcap · tanh(scale · q·k / softcap), less ALiBi's
             * slope · |i + δ − j|. Element e of n-tile n is key key_r[e / 2], query
             * i0 + 8n + 2t + e % 2. Each variant is its own pass over the scores: a branch per
             * element would cut the passes' independent work into small blocks (2 warps per
             * scheduler hide MUFU latency only with it). */
            const float slope2 = VAR ? fa_alibi_slope2(&a.var.v, b, h) : 0.f;
            const bool cap = VAR && a.cap_in != 0.f;
            const float dist0[2] = {(float)(i0 + 2 * t + delta - key_r[0]), (float)(i0 + 2 * t + delta - key_r[1])};
            if (VAR) {
                if (cap) {
#pragma unroll
                    for (int n = 0; n < BM / 8; n++)
#pragma unroll
                        for (int e = 0; e < 4; e++)
                            r_s[n][e] = a.cap2 * var_tanh(r_s[n][e] * a.cap_in);
                } else {
#pragma unroll
                    for (int n = 0; n < BM / 8; n++)
#pragma unroll
                        for (int e = 0; e < 4; e++)
                            r_s[n][e] *= a.scale_log2;
                }
                if (slope2 != 0.f) {
#pragma unroll
                    for (int n = 0; n < BM / 8; n++)
#pragma unroll
                        for (int e = 0; e < 4; e++)
                            r_s[n][e] -= slope2 * fabsf(dist0[e / 2] + (float)(8 * n + e % 2));
                }
            }
#pragma unroll
            for (int n = 0; n < BM / 8; n++) {
                const float2 l2 = *reinterpret_cast<const float2 *>(&s.lse2[st][8 * n + 2 * t]);
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float x = VAR ? ex2(r_s[n][e] - (e % 2 ? l2.y : l2.x))
                                  : ex2(fmaf(r_s[n][e], a.scale_log2, -(e % 2 ? l2.y : l2.x)));
                    if (!full) {
                        const int i = i0 + 8 * n + 2 * t + e % 2, j = key_r[e / 2];
                        bool vis = j < Nk && j >= i + delta - left && j <= i + delta + right;
                        if (VAR)
                            vis = vis && kvis[e / 2] && i < Nq;
                        if (!vis)
                            x = 0.f;
                    }
                    r_s[n][e] = x;
                }
            }

            /* dV += Pᵀ dO. */
            keys_by_rows<T, D, BM, false>(r_dv, r_s, s_do, lane_off, 0, 0, 0);

            /* dSᵀ = Pᵀ ∘ (dPᵀ − D), into r_s; with a softcap, times 1 − tanh², where
             * softcap · log2 e · tanh = log2 P + lse₂ + ALiBi's term, for P > 0 (P = 0, a hidden
             * pair or a padding row whose lse₂ is +inf, has dS = 0: the factor, then inf or NaN,
             * is not used). */
            if (cap) {
#pragma unroll
                for (int n = 0; n < BM / 8; n++) {
                    const float2 dd = *reinterpret_cast<const float2 *>(&s.dd[st][8 * n + 2 * t]);
                    const float2 l2 = *reinterpret_cast<const float2 *>(&s.lse2[st][8 * n + 2 * t]);
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const float z = __log2f(r_s[n][e]) + (e % 2 ? l2.y : l2.x)
                                      + slope2 * fabsf(dist0[e / 2] + (float)(8 * n + e % 2));
                        const float th = z / a.cap2;
                        const float dtanh = r_s[n][e] > 0.f ? 1.f - th * th : 0.f;
                        r_s[n][e] *= (r_dp[n][e] - (e % 2 ? dd.y : dd.x)) * dtanh;
                    }
                }
            } else {
#pragma unroll
                for (int n = 0; n < BM / 8; n++) {
                    const float2 dd = *reinterpret_cast<const float2 *>(&s.dd[st][8 * n + 2 * t]);
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        r_s[n][e] *= r_dp[n][e] - (e % 2 ? dd.y : dd.x);
                }
            }

            /* dK += dSᵀ Q (scale applied at the end); dSᵀ to shared memory for dQ. */
            keys_by_rows<T, D, BM, true>(r_dk, r_s, s_q, lane_off, s_ds, 16 * warp + g, t);
        } else {
#pragma unroll
            for (int c = 0; c < BM / 8; c++) {
                st_shared_u32(s_ds + swz<BM>(16 * warp + g, c) + 4 * t, 0u);
                st_shared_u32(s_ds + swz<BM>(16 * warp + g + 8, c) + 4 * t, 0u);
            }
        }
        /* Barrier: every warp's dSᵀ rows are visible. */
        __syncthreads();

        /* dQ += dS K: queries 16·qg.. × columns c0..c0 + DQ_COLS − 1 per warp; dS's A fragments
         * from dSᵀ (ldmatrix.trans), K rows are the k index (trans). */
        const int qg = warp % C::QG, c0 = C::DQ_COLS * (warp / C::QG);
        if (i0 + 16 * qg < Nq) {
            float r_dq[C::DQ_COLS / 8][4] = {};
            const int kk_end = (n1 - n0 + 15) / 16;      /* key sub-blocks with a key < Nk */
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++) {
                if (kk >= kk_end)
                    break;
                uint32_t r_a[4];
                ldsm_x4_trans(r_a, frag_addr<BM>(s_ds, lane_off_ds, 16 * kk, 2 * qg));
#pragma unroll
                for (int n2 = 0; n2 < C::DQ_COLS / 16; n2++) {
                    uint32_t r_b[4];
                    ldsm_x4_trans(r_b, frag_addr<D>(s_k, lane_off, 16 * kk, c0 / 8 + 2 * n2));
                    mma16816<T>(r_dq[2 * n2], r_a, r_b[0], r_b[1]);
                    mma16816<T>(r_dq[2 * n2 + 1], r_a, r_b[2], r_b[3]);
                }
            }
            red_add_dq(a.dq_acc + bwd_row<VAR>(a, sq, b, h, i0 + 16 * qg) * a.D + c0, a.D, r_dq, g, t);
        }
    }

    /* Barrier: every warp is done with K and V (dQ reads all of K) and no copy into them is in
     * flight; each warp stages its dK (scaled) and dV rows in its own rows of them, then stores
     * rows < Nk. */
    cp_async_wait<0>();
    __syncthreads();
    const uint32_t s_wk = s_k + 16 * warp * D * 2, s_wv = s_v + 16 * warp * D * 2;
#pragma unroll
    for (int n = 0; n < D / 8; n++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            st_shared_u32(s_wk + swz<D>(g + 8 * r, n) + 4 * t,
                          pack2<T>(r_dk[n][2 * r] * a.scale, r_dk[n][2 * r + 1] * a.scale));
            st_shared_u32(s_wv + swz<D>(g + 8 * r, n) + 4 * t, pack2<T>(r_dv[n][2 * r], r_dv[n][2 * r + 1]));
        }
    __syncwarp();
    const int64_t krow = sq.k0 + key_w;
    uint16_t *g_dk = (uint16_t *)bp.dk + b * bp.dk_batch_stride + hk * bp.dk_head_stride + krow * bp.dk_row_stride;
    uint16_t *g_dv = (uint16_t *)bp.dv + b * bp.dv_batch_stride + hk * bp.dv_head_stride + krow * bp.dv_row_stride;
    store_o_rows<D, 16>(s_wk, g_dk, 0, Nk - key_w, d, bp.dk_row_stride, a.vec_dk);
    store_o_rows<D, 16>(s_wv, g_dv, 0, Nk - key_w, d, bp.dv_row_stride, a.vec_dv);
}

/* ---- Host ---------------------------------------------------------------------------------- */

/* The tile's head-dim width for d, 0 where no tile is compiled. */
static int bwd_width(int64_t d)
{
    return d <= 64 ? 64 : d <= 128 ? 128 : 0;
}

/* Fills everything but the workspace pointers, or answers FA_ERR_UNSUPPORTED (backward_rows.cuh). */
int bwd_prepare(const fa_backward_params *bp, const fa_variants *v_in, bwd_args *a)
{
    const fa_params *p = &bp->p;
    fa_variants v;
    if (v_in != NULL)
        v = *v_in;
    else
        memset(&v, 0, sizeof v);
    if (p->dtype == FA_FLOAT32 || bwd_width(p->d) == 0 || p->Nq < 1 || p->Nk < 1 || v.mask != NULL)
        return FA_ERR_UNSUPPORTED;
    /* Positions, δ and the window's bounds in 32 bits. */
    if (p->Nq + p->Nk > (1 << 29))
        return FA_ERR_UNSUPPORTED;
    *a = bwd_args{};
    a->bp = *bp;
    a->var = var_resolve(p, &v);
    a->sinks = v.sinks;
    a->scale = p->scale;
    a->scale_log2 = p->scale * FA_LOG2E;
    a->cap_in = v.softcap > 0.f ? p->scale / v.softcap : 0.f;
    a->cap2 = v.softcap * FA_LOG2E;
    a->q_per_kv = p->Hq / p->Hkv;
    a->D = bwd_width(p->d);
    a->packed = v.cu_seqlens_q != NULL;
    a->nq_pad = (p->Nq + BWD_ROWS_PAD - 1) / BWD_ROWS_PAD * BWD_ROWS_PAD;
    a->head_rows = (v.total_q + 64 + 31) / 32 * 32;
    a->rows = a->packed ? p->Hq * a->head_rows : p->B * p->Hq * a->nq_pad;
    /* var_resolve's −1 (unbounded) as a side wider than any sequence. */
    const int far = (int)(p->Nq + p->Nk);
    a->left = a->var.left >= 0 ? a->var.left : far;
    a->right = a->var.right >= 0 ? a->var.right : far;
    a->vec_load = fa_rows_aligned16(p->q, p->q_batch_stride, p->q_head_stride, p->q_row_stride)
               && fa_rows_aligned16(p->k, p->k_batch_stride, p->k_head_stride, p->k_row_stride)
               && fa_rows_aligned16(p->v, p->v_batch_stride, p->v_head_stride, p->v_row_stride)
               && fa_rows_aligned16(bp->dout, bp->do_batch_stride, bp->do_head_stride, bp->do_row_stride);
    a->vec_dk = fa_rows_aligned16(bp->dk, bp->dk_batch_stride, bp->dk_head_stride, bp->dk_row_stride);
    a->vec_dv = fa_rows_aligned16(bp->dv, bp->dv_batch_stride, bp->dv_head_stride, bp->dv_row_stride);
    return FA_OK;
}

size_t bwd_workspace(const bwd_args *a)
{
    return (size_t)a->rows * (size_t)(a->D + 2) * sizeof(float);
}

int bwd_bind(bwd_args *a, void *workspace, size_t workspace_bytes)
{
    if (workspace == NULL || workspace_bytes < bwd_workspace(a))
        return FA_ERR_SCRATCH;
    const size_t rows = (size_t)a->rows;
    a->dq_acc = (float *)workspace;
    a->lse2 = a->dq_acc + rows * a->D;
    a->dd = a->lse2 + rows;
    return FA_OK;
}

/* The row kernels' grid: one CTA per 256 / CH rows of the workspace, CH = D / 8 (bwd_rows_at). */
static unsigned bwd_row_ctas(const bwd_args *a)
{
    return (unsigned)(a->rows / (256 / (a->D / 8)));
}

template <typename T>
static int bwd_prep_t(bwd_args *a, cudaStream_t stream)
{
    const fa_params *p = &a->bp.p;
    if (a->rows / 16 > INT32_MAX)
        return FA_ERR_UNSUPPORTED;
    if (a->sinks != NULL && a->bp.dsinks != NULL)
        FA_CUDA_TRY(cudaMemsetAsync(a->bp.dsinks, 0, sizeof(float) * (size_t)p->Hq, stream));
    else
        a->sinks = NULL;
    if (a->D == 64)
        fa_sm80_backward_prep_kernel<T, 8><<<bwd_row_ctas(a), 256, 0, stream>>>(*a);
    else
        fa_sm80_backward_prep_kernel<T, 16><<<bwd_row_ctas(a), 256, 0, stream>>>(*a);
    FA_CUDA_TRY(cudaGetLastError());
    return FA_OK;
}

template <typename T>
static int bwd_dq_t(const bwd_args *a, cudaStream_t stream)
{
    if (a->D == 64)
        fa_sm80_backward_dq_kernel<T, 8><<<bwd_row_ctas(a), 256, 0, stream>>>(*a);
    else
        fa_sm80_backward_dq_kernel<T, 16><<<bwd_row_ctas(a), 256, 0, stream>>>(*a);
    FA_CUDA_TRY(cudaGetLastError());
    return FA_OK;
}

int bwd_prep(bwd_args *a, cudaStream_t stream)
{
    return a->bp.p.dtype == FA_BFLOAT16 ? bwd_prep_t<__nv_bfloat16>(a, stream) : bwd_prep_t<__half>(a, stream);
}

int bwd_dq(const bwd_args *a, cudaStream_t stream)
{
    return a->bp.p.dtype == FA_BFLOAT16 ? bwd_dq_t<__nv_bfloat16>(a, stream) : bwd_dq_t<__half>(a, stream);
}

template <typename T, class C, bool VAR>
static int bwd_launch(bwd_args *a, cudaStream_t stream)
{
    void (*kernel)(const bwd_args) = fa_sm80_backward_kernel<T, C, VAR>;
    const size_t smem = sizeof(bwd_smem<T, C>);
    static unsigned s_raised;
    int st = fa_tc_prepare((const void *)kernel, smem, 80, &s_raised);
    if (st != FA_OK)
        return st;
    const fa_params *p = &a->bp.p;
    st = bwd_prep(a, stream);
    if (st != FA_OK)
        return st;
    a->n_k_blocks = (p->Nk + C::BN - 1) / C::BN;
    const int64_t total = a->n_k_blocks * p->B * p->Hkv;
    a->n_blocks = total;
    for (int64_t first = 0; first < total; first += INT32_MAX) {
        a->first_block = first;
        const int64_t n = total - first < INT32_MAX ? total - first : INT32_MAX;
        kernel<<<(unsigned)n, C::THREADS, smem, stream>>>(*a);
        FA_CUDA_TRY(cudaGetLastError());
    }
    return bwd_dq(a, stream);
}

extern "C" int fa_sm80_backward_workspace_bytes(const fa_backward_params *bp, const fa_variants *v, size_t *bytes)
{
    bwd_args a;
    *bytes = 0;
    const int st = bwd_prepare(bp, v, &a);
    if (st == FA_OK)
        *bytes = bwd_workspace(&a);
    return st;
}

extern "C" int fa_sm80_backward(const fa_backward_params *bp, const fa_variants *v, void *workspace,
                                size_t workspace_bytes, cudaStream_t stream)
{
    bwd_args a;
    const int st = bwd_prepare(bp, v, &a);
    if (st != FA_OK)
        return st;
    const int st2 = bwd_bind(&a, workspace, workspace_bytes);
    if (st2 != FA_OK)
        return st2;
    const int bf16 = bp->p.dtype == FA_BFLOAT16;
    const bool var = a.cap_in != 0.f || a.var.v.alibi_slopes != NULL || a.var.v.key_mask != NULL || a.packed;
    if (a.D == 64) {
        if (var)
            return bf16 ? bwd_launch<__nv_bfloat16, bwd_tile_d64, true>(&a, stream)
                        : bwd_launch<__half, bwd_tile_d64, true>(&a, stream);
        return bf16 ? bwd_launch<__nv_bfloat16, bwd_tile_d64, false>(&a, stream)
                    : bwd_launch<__half, bwd_tile_d64, false>(&a, stream);
    }
    if (var)
        return bf16 ? bwd_launch<__nv_bfloat16, bwd_tile_d128, true>(&a, stream)
                    : bwd_launch<__half, bwd_tile_d128, true>(&a, stream);
    return bf16 ? bwd_launch<__nv_bfloat16, bwd_tile_d128, false>(&a, stream)
                : bwd_launch<__half, bwd_tile_d128, false>(&a, stream);
}
