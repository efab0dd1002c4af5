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
 * The 8 warps split each product in two dimensions (bwd_tile): Sᵀ and dPᵀ as 4 groups of 32 keys
 * × 2 of 32 queries, so that each warp reads a quarter of K's and Q's tiles, not all of Q; Pᵀ and
 * dSᵀ then go through shared memory, from which dV, dK (4 × 32 keys by 2 column halves) and dQ
 * (2 × 32 queries by 4 column quarters) read them. Q and dO blocks are double-buffered through
 * cp.async: block it + 1 lands while block it is computed. Shared tiles are swizzled as in sm80.cu.
 *
 * Variants: the alignment, the window (causal is a window with right = 0), softcap, ALiBi,
 * key_mask, sinks and packed sequences; an attn_mask tensor is FA_ERR_UNSUPPORTED. With a softcap,
 * dSᵀ also takes the cap's derivative 1 − tanh², tanh recovered from P itself (below). Packed
 * sequences take the grid of the longest; the workspace holds each head's packed rows plus
 * BWD_ROWS_PAD rows of slack, so a sequence's last query block stays inside its head. Reached through
 * fa_backward_cuda() (dispatch.cu). D reads the output rounded to its dtype, as
 * FlashAttention-2/3 do (tests/test_backward.py's bound says what that costs).
 *
 * In order: the tile shapes (bwd_tile, with their measured reasons), the dQ reduction, the shared
 * memory struct; ---- Kernels: the warp products (warp_gemm, warp_gemm_frags), the C fragments'
 * stores, the main kernel (its step: loads, Sᵀ and dPᵀ, the exponentials, dSᵀ, the second barrier,
 * dV and dK, dQ); ---- Host: bwd_prepare / bwd_workspace / bwd_bind, the prep and dq launches, the
 * main launch and the tile choice (fa_sm80_backward).
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <float.h>
#include <stdint.h>
#include <string.h>
#include <type_traits>

#include "families.h"
#include "dtype.cuh"
#include "ptx.cuh"
#include "softmax.cuh"
#include "variants.cuh"
#include "backward_rows.cuh"

/* A tile shape: D the compiled head-dim width; BN = 128 keys per CTA and 8 warps; BM queries per
 * step. Sᵀ and dPᵀ are split over the warps as KG = BN / KW groups of KW keys (warp % KG) × the
 * rest over the step's queries (warp / KG, QW each); dK and dV as the same key groups × column
 * groups of DKV_COLS; dQ = dS K as QG query groups (warp / (8 / QG)) × column groups of DQ_COLS.
 * KW = 16 (one group of queries): a warp's Pᵀ and dSᵀ C fragments are already the A fragments of
 * dV and dK, which stay in registers (as sm80.cu's P for P V), and only dSᵀ goes through shared
 * memory, for dQ. KW = 32: a warp reads a quarter of K's and Q's tiles for Sᵀ instead of all of
 * Q, and Pᵀ and dSᵀ go through shared memory, from which dV and dK read them (P_SMEM). PAIRS: the
 * order of those stores, which moves ptxas's register allocation (below). LOADS_LATE: the plain
 * kernels issue the next step's loads just before the step's second barrier rather than just
 * after its first. */
template <int D_, int BM_, int KW_, int QG_, bool PAIRS_, int MIN_CTAS_, bool LOADS_LATE_ = false>
struct bwd_tile {
    static constexpr int D = D_, BN = 128, BM = BM_, KW = KW_, QG = QG_, WARPS = 8, THREADS = 32 * WARPS;
    static constexpr int MIN_CTAS = MIN_CTAS_;
    static constexpr bool LOADS_LATE = LOADS_LATE_;
    static constexpr bool PAIRS = PAIRS_;   /* P_SMEM: each Pᵀ pair stored beside its dSᵀ pair, not all
                                              * of Pᵀ before dSᵀ is computed */
    static constexpr int KG = BN / KW, SQG = WARPS / KG, QW = BM / SQG, MT = KW / 16, NQ = QW / 8;
    static constexpr int DKV_COLS = D / SQG, DQ_ROWS = BM / QG, DQ_COLS = D * QG / WARPS;
    static constexpr bool P_SMEM = SQG > 1;
    static_assert((KW == 16 || KW == 32) && QW % 16 == 0 && DKV_COLS % 16 == 0 && DQ_ROWS % 16 == 0
                  && DQ_COLS % 16 == 0 && D % 64 == 0, "tile shape");
    static_assert(BM <= BWD_ROWS_PAD, "a step's rows stay inside its head's rows of the workspace");
};

/* Shared memory: (2·BN + 4·BM) · D · 2 + (1 + P_SMEM) · BN · BM · 2 + 16 · BM bytes: 161 KB at
 * d = 128, 162 KB at d = 64 (sm_80 and sm_90 opt in to 163 and 227 KB); GPUs with 99 KB (8.6, 8.9)
 * take d = 64 on bwd_tile_d64_small and compute d = 128 exactly. Measured reasons (H200, bf16, forced,
 * SDPA flash's backward as the yardstick; bench/LOG.md):
 *   - 128 keys per CTA: 64-key blocks at 2 CTAs per SM were 9 % slower at d = 128, 16k
 *     (#2026-12-02-backward)
 *   - d = 128 on 32-key warps with PAIRS: +7.2 % over 16-key warps, without PAIRS +3.4 %; d = 64 on
 *     128-row steps without PAIRS +4.2 %, on 64-row steps −2 %, with PAIRS (it spills) +1.2 %
 *     (#2026-12-04-sm80-bwd-layout)
 *   - the step's bookkeeping trimmed: d = 128 +3.9 %, d = 64 +6.8 %; dQ's product before dK's −0.8 %
 *     (#2026-12-04-sm80-bwd-issue)
 *   - LOADS_LATE: d = 64 +0.9 to +1.2 %, d = 128 −0.5 to −0.7 % (plain bf16 kernels;
 *     #2026-12-05-h200); on d = 64 alone, against main on an H100: +0.9 to +1.6 % at three of four
 *     points (#2026-12-05-h100) */
typedef bwd_tile<64, 128, 32, 4, false, 1, true> bwd_tile_d64;
typedef bwd_tile<64, 64, 16, 4, false, 1> bwd_tile_d64_small;
typedef bwd_tile<128, 64, 32, 2, true, 1> bwd_tile_d128;

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
    T p[C::P_SMEM ? C::BN : 1][C::BM];   /* P_SMEM: Pᵀ of the current step, swizzled BM columns wide */
    T ds[C::BN][C::BM];              /* dSᵀ of the current step, the same layout */
    float lse2[2][C::BM];
    float dd[2][C::BM];
};

/* ---- Kernels ------------------------------------------------------------------------------- */

/* acc += A B for one warp: MT 16-row tiles of A from row m0 and NT 8-column tiles of B from column
 * n0, over KSTEPS 16-wide steps of k from 0. A is a swizzled tile WA elements wide stored M × K
 * (A_KM false) or K × M (true: ldmatrix.trans gives A's fragments); B likewise, WB wide, stored N × K
 * (B_KN false) or K × N (true). One ldmatrix.x4 brings an A tile or two B tiles. */
template <typename T, int MT, int NT, int KSTEPS, int WA, bool A_KM, int WB, bool B_KN>
__device__ __forceinline__ void warp_gemm(float (&acc)[MT][NT][4], uint32_t s_a, int m0, uint32_t s_b, int n0)
{
    static_assert(NT % 2 == 0, "B tiles come in pairs");
    const int lane = threadIdx.x % 32;
    const uint32_t off_rows = swz<WA>(lane % 16, lane / 16);                    /* A stored M × K */
    const uint32_t off_cols = swz<WA>(lane % 8 + 8 * (lane / 16), (lane / 8) % 2); /* A stored K × M */
    const uint32_t off_bn = swz<WB>(lane % 8 + 8 * (lane / 16), (lane / 8) % 2);   /* B stored N × K */
    const uint32_t off_bk = swz<WB>(lane % 16, lane / 16);                      /* B stored K × N */
#pragma unroll
    for (int kk = 0; kk < KSTEPS; kk++) {
        uint32_t r_a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            if (A_KM)
                ldsm_x4_trans(r_a[mt], frag_addr<WA>(s_a, off_cols, 16 * kk, (m0 + 16 * mt) / 8));
            else
                ldsm_x4(r_a[mt], frag_addr<WA>(s_a, off_rows, m0 + 16 * mt, 2 * kk));
        }
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t r_b[4];
            if (B_KN)
                ldsm_x4_trans(r_b, frag_addr<WB>(s_b, off_bk, 16 * kk, (n0 + 16 * np) / 8));
            else
                ldsm_x4(r_b, frag_addr<WB>(s_b, off_bn, n0 + 16 * np, 2 * kk));
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                mma16816<T>(acc[mt][2 * np], r_a[mt], r_b[0], r_b[1]);
                mma16816<T>(acc[mt][2 * np + 1], r_a[mt], r_b[2], r_b[3]);
            }
        }
    }
}

/* acc += X R for one warp's MT 16-key tiles: X's C fragments x (16·MT keys × NQ·8 queries: Pᵀ or
 * dSᵀ) are, two query tiles at a time, the A fragments of queries 16kk..; R (the step's BM rows × D,
 * swizzled at s_r) has its rows as the k index (ldmatrix.trans), columns c0.. of it as NT tiles. */
template <typename T, int MT, int NQ, int NT, int D>
__device__ __forceinline__ void warp_gemm_frags(float (&acc)[MT][NT][4], const float (&x)[MT][NQ][4], uint32_t s_r,
                                                int c0)
{
    const int lane = threadIdx.x % 32;
    const uint32_t off = swz<D>(lane % 16, lane / 16);
#pragma unroll
    for (int kk = 0; kk < NQ / 2; kk++) {
        uint32_t r_a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            r_a[mt][0] = pack2<T>(x[mt][2 * kk][0], x[mt][2 * kk][1]);
            r_a[mt][1] = pack2<T>(x[mt][2 * kk][2], x[mt][2 * kk][3]);
            r_a[mt][2] = pack2<T>(x[mt][2 * kk + 1][0], x[mt][2 * kk + 1][1]);
            r_a[mt][3] = pack2<T>(x[mt][2 * kk + 1][2], x[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t r_b[4];
            ldsm_x4_trans(r_b, frag_addr<D>(s_r, off, 16 * kk, (c0 + 16 * np) / 8));
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                mma16816<T>(acc[mt][2 * np], r_a[mt], r_b[0], r_b[1]);
                mma16816<T>(acc[mt][2 * np + 1], r_a[mt], r_b[2], r_b[3]);
            }
        }
    }
}

/* Byte offset, in a W-wide swizzled tile, of this lane's pair r (row g + 8r, columns 2t, 2t + 1) of
 * the C fragment of 16-row tile mt from row r0 and 8-column tile n from column c0. */
template <int W>
__device__ __forceinline__ uint32_t frag_pair_at(int r0, int c0, int mt, int n, int r)
{
    const int lane = threadIdx.x % 32;
    return swz<W>(r0 + 16 * mt + lane / 4 + 8 * r, c0 / 8 + n) + 4 * (lane % 4);
}

/* This warp's C fragments x (16·MT keys from row k0 × NQ·8 queries from column q0) packed into the
 * BM-wide swizzled tile at s_x (Pᵀ or dSᵀ). */
template <typename T, int MT, int NQ, int BM>
__device__ __forceinline__ void store_frags(uint32_t s_x, const float (&x)[MT][NQ][4], int k0, int q0)
{
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int n = 0; n < NQ; n++)
#pragma unroll
            for (int r = 0; r < 2; r++)
                st_shared_u32(s_x + frag_pair_at<BM>(k0, q0, mt, n, r), pack2<T>(x[mt][n][2 * r], x[mt][n][2 * r + 1]));
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

    /* This warp's keys key_w.. (KW of them; C rows g, g + 8 of each 16-key tile are this thread's);
     * key_mask: whether each of this thread's keys takes part, and whether all or none of the warp's
     * do; a CTA none of whose keys takes part has dK = dV = 0. */
    constexpr int MT = C::MT, NQ = C::NQ;
    const int wk = warp % C::KG, wq = warp / C::KG;
    const int key_w = n0 + C::KW * wk;
    int key_r[MT][2];
    bool kvis[MT][2];
    bool mine_any = false, mine_all = true;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int j = key_w + 16 * mt + g + 8 * r;
            key_r[mt][r] = j;
            kvis[mt][r] = true;
            if (VAR && a.var.v.key_mask != NULL)
                kvis[mt][r] = j < Nk && a.var.v.key_mask[b * a.var.v.key_mask_batch_stride + j] != 0;
            mine_any = mine_any || kvis[mt][r];
            mine_all = mine_all && kvis[mt][r];
        }
    const bool warp_any = !VAR || __any_sync(0xffffffffu, mine_any);
    const bool warp_all = !VAR || __all_sync(0xffffffffu, mine_all);
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

    /* Issues the loads of the step on head hk·G + hi, query block qb_lo + qi into stage st: Q and
     * dO rows i0.., their lse₂ and D (packed rows of the workspace need not be 16-byte aligned:
     * one float per copy). */
    auto load_step = [&](int st, int hi, int qi) {
        const int64_t h = hk * G + hi;
        const int i0 = (qb_lo + qi) * BM;
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
        load_step(0, 0, 0);
    cp_async_commit();

    const uint32_t s_k = smem_u32(s.k), s_v = smem_u32(s.v), s_p = smem_u32(s.p), s_ds = smem_u32(s.ds);
    const int cd = C::DKV_COLS * wq;                    /* dK, dV: this warp's columns cd.. of its keys */
    const int qg = warp / (C::WARPS / C::QG), cq = C::DQ_COLS * (warp % (C::WARPS / C::QG));  /* dQ */

    float r_dk[MT][C::DKV_COLS / 8][4] = {}, r_dv[MT][C::DKV_COLS / 8][4] = {};  /* C layout */

    /* Step it is head hk·G + hi, query block qb_lo + qi (it = hi · n_qb + qi), counted rather
     * than divided: two integer divisions a step were 60 instructions of a warp's 1450. */
    for (int it = 0, hi = 0, qi = 0; it < n_it; it++) {
        const int st = it & 1;
        const bool head_next = qi + 1 == n_qb;
        const int hi_next = head_next ? hi + 1 : hi, qi_next = head_next ? 0 : qi + 1;
        cp_async_wait<0>();
        /* Barrier: step it's tiles (and K, V) are visible; every warp has finished step it − 1,
         * whose stage the loads below overwrite and whose Pᵀ and dSᵀ this step overwrites. */
        __syncthreads();
        /* The next step's loads into the other stage, free since this barrier: here, or once this
         * warp's Pᵀ and dSᵀ are stored (LOADS_LATE, plain kernels). */
        constexpr bool loads_late = C::LOADS_LATE && !VAR;
        auto load_next = [&]() {
            if (it + 1 < n_it)
                load_step(st ^ 1, hi_next, qi_next);
            cp_async_commit();
        };
        if constexpr (!loads_late)
            load_next();

        const int64_t h = hk * G + hi;
        const int i0 = (qb_lo + qi) * BM;
        hi = hi_next;
        qi = qi_next;
        const uint32_t s_q = smem_u32(s.q[st]), s_do = smem_u32(s.dO[st]);

        /* This warp's keys against its queries q_first..: all hidden, all visible, or mixed (each
         * pair checked: the window, key_mask, j < Nk and, packed, i < Nq; unpacked query rows past
         * Nq have lse₂ = +inf, so their P is 0). */
        const int key_last = key_w + C::KW - 1, q_first = i0 + C::QW * wq, q_last = q_first + C::QW - 1;
        const bool none = !warp_any || key_w >= Nk || q_first >= Nq || key_last < q_first + delta - left
                       || key_w > q_last + delta + right;
        const bool full = warp_all && key_last < Nk && (!VAR || q_last < Nq) && key_w >= q_last + delta - left
                       && key_last <= q_first + delta + right;
        if (!none) {
            /* Sᵀ = K Qᵀ and dPᵀ = V dOᵀ: KW keys × QW queries; Q and dO rows are the n index. */
            float r_s[MT][NQ][4] = {}, r_dp[MT][NQ][4] = {};
            warp_gemm<T, MT, NQ, D / 16, D, false, D, false>(r_s, s_k, C::KW * wk, s_q, C::QW * wq);
            warp_gemm<T, MT, NQ, D / 16, D, false, D, false>(r_dp, s_v, C::KW * wk, s_do, C::QW * wq);

            /* Pᵀ = exp2(score − lse₂) on visible pairs, else 0, the score in log2 units as the
             * forward has it: scale · q·k, or softcap · tanh(scale · q·k / softcap), less ALiBi's
             * slope · |i + δ − j|. Element e of tile (mt, n) is key key_r[mt][e / 2], query
             * q_first + 8n + 2t + e % 2. Each variant is its own pass over the scores: a branch per
             * element would cut the passes' independent work into small blocks (2 warps per
             * scheduler hide MUFU latency only with it). */
            const float slope2 = VAR ? fa_alibi_slope2(&a.var.v, b, h) : 0.f;
            const bool cap = VAR && a.cap_in != 0.f;
            float dist0[MT][2];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++)
                    dist0[mt][r] = (float)(q_first + 2 * t + delta - key_r[mt][r]);
            if (VAR) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int n = 0; n < NQ; n++)
#pragma unroll
                        for (int e = 0; e < 4; e++)
                            r_s[mt][n][e] = cap ? a.cap2 * var_tanh(r_s[mt][n][e] * a.cap_in)
                                                : r_s[mt][n][e] * a.scale_log2;
                if (slope2 != 0.f) {
#pragma unroll
                    for (int mt = 0; mt < MT; mt++)
#pragma unroll
                        for (int n = 0; n < NQ; n++)
#pragma unroll
                            for (int e = 0; e < 4; e++)
                                r_s[mt][n][e] -= slope2 * fabsf(dist0[mt][e / 2] + (float)(8 * n + e % 2));
                }
            }
            /* Two copies of the pass, chosen once: with the mask's test inside one loop, ptxas
             * predicated it rather than branching, and a full warp still issued its 200
             * instructions a step. */
            auto exponentials = [&](auto masked) {
#pragma unroll
                for (int n = 0; n < NQ; n++) {
                    const float2 l2 = *reinterpret_cast<const float2 *>(&s.lse2[st][C::QW * wq + 8 * n + 2 * t]);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++)
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            float x = VAR ? ex2(r_s[mt][n][e] - (e % 2 ? l2.y : l2.x))
                                          : ex2(fmaf(r_s[mt][n][e], a.scale_log2, -(e % 2 ? l2.y : l2.x)));
                            if constexpr (decltype(masked)::value) {
                                const int i = q_first + 8 * n + 2 * t + e % 2, j = key_r[mt][e / 2];
                                /* & rather than &&: no branch per element */
                                bool vis = (j < Nk) & (j >= i + delta - left) & (j <= i + delta + right);
                                if (VAR)
                                    vis = vis & kvis[mt][e / 2] & (i < Nq);
                                x = vis ? x : 0.f;
                            }
                            r_s[mt][n][e] = x;
                        }
                }
            };
            if (full)
                exponentials(std::false_type{});
            else
                exponentials(std::true_type{});

            /* 16-key warps: dV += Pᵀ dO from the fragments; else Pᵀ to shared memory (here, or
             * pair by pair below). */
            if constexpr (!C::P_SMEM)
                warp_gemm_frags<T, MT, NQ, C::DKV_COLS / 8, D>(r_dv, r_s, s_do, cd);
            else if constexpr (!C::PAIRS)
                store_frags<T, MT, NQ, BM>(s_p, r_s, C::KW * wk, C::QW * wq);

            /* dSᵀ = Pᵀ ∘ (dPᵀ − D), into r_dp; with a softcap, times 1 − tanh², where
             * softcap · log2 e · tanh = log2 P + lse₂ + ALiBi's term, for P > 0 (P = 0, a hidden
             * pair or a padding row whose lse₂ is +inf, has dS = 0: the factor, then inf or NaN,
             * is not used). PAIRS: each pair of Pᵀ and of dSᵀ to shared memory as it is done. */
#pragma unroll
            for (int n = 0; n < NQ; n++) {
                const float2 dd = *reinterpret_cast<const float2 *>(&s.dd[st][C::QW * wq + 8 * n + 2 * t]);
                const float2 l2 = *reinterpret_cast<const float2 *>(&s.lse2[st][C::QW * wq + 8 * n + 2 * t]);
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int r = 0; r < 2; r++) {
#pragma unroll
                        for (int e = 2 * r; e < 2 * r + 2; e++) {
                            float f = r_dp[mt][n][e] - (e % 2 ? dd.y : dd.x);
                            if (cap) {
                                const float z = __log2f(r_s[mt][n][e]) + (e % 2 ? l2.y : l2.x)
                                              + slope2 * fabsf(dist0[mt][e / 2] + (float)(8 * n + e % 2));
                                const float th = z / a.cap2;
                                f *= r_s[mt][n][e] > 0.f ? 1.f - th * th : 0.f;
                            }
                            r_dp[mt][n][e] = r_s[mt][n][e] * f;
                        }
                        if constexpr (C::P_SMEM && C::PAIRS) {
                            const uint32_t at = frag_pair_at<BM>(C::KW * wk, C::QW * wq, mt, n, r);
                            st_shared_u32(s_p + at, pack2<T>(r_s[mt][n][2 * r], r_s[mt][n][2 * r + 1]));
                            st_shared_u32(s_ds + at, pack2<T>(r_dp[mt][n][2 * r], r_dp[mt][n][2 * r + 1]));
                        }
                    }
            }

            /* dSᵀ to shared memory for dQ (but PAIRS: done above); 16-key warps: dK += dSᵀ Q from
             * the fragments (scale applied at the end). */
            if constexpr (!C::P_SMEM || !C::PAIRS)
                store_frags<T, MT, NQ, BM>(s_ds, r_dp, C::KW * wk, C::QW * wq);
            if constexpr (!C::P_SMEM)
                warp_gemm_frags<T, MT, NQ, C::DKV_COLS / 8, D>(r_dk, r_dp, s_q, cd);
        } else {
            const float zero[MT][NQ][4] = {};
            if constexpr (C::P_SMEM)
                store_frags<T, MT, NQ, BM>(s_p, zero, C::KW * wk, C::QW * wq);
            store_frags<T, MT, NQ, BM>(s_ds, zero, C::KW * wk, C::QW * wq);
        }
        if constexpr (loads_late)
            load_next();
        /* Barrier: every warp's dSᵀ (and Pᵀ) rows are visible. */
        __syncthreads();

        /* P_SMEM: dV += Pᵀ dO, dK += dSᵀ Q for this warp's keys and columns cd..; dO and Q rows
         * are the k index (trans). */
        if constexpr (C::P_SMEM) {
            warp_gemm<T, MT, C::DKV_COLS / 8, BM / 16, BM, false, D, true>(r_dv, s_p, C::KW * wk, s_do, cd);
            warp_gemm<T, MT, C::DKV_COLS / 8, BM / 16, BM, false, D, true>(r_dk, s_ds, C::KW * wk, s_q, cd);
        }

        /* dQ += dS K: queries DQ_ROWS · qg.. × columns cq..; dS's A fragments from dSᵀ (trans), K
         * rows are the k index (trans). Over all BN keys: past Nk, K's rows are zero-filled and
         * dSᵀ's are 0. The accumulator's rows are D (= a.D) floats wide and a head's rows
         * consecutive, so one pointer and immediate offsets reach all of the warp's rows. */
        const int dq_first = i0 + C::DQ_ROWS * qg;
        if (dq_first < Nq) {
            float r_dq[C::DQ_ROWS / 16][C::DQ_COLS / 8][4] = {};
            warp_gemm<T, C::DQ_ROWS / 16, C::DQ_COLS / 8, BN / 16, BM, true, D, true>(r_dq, s_ds, C::DQ_ROWS * qg,
                                                                                     s_k, cq);
            float *acc = a.dq_acc + bwd_row<VAR>(a, sq, b, h, dq_first) * D + cq;
#pragma unroll
            for (int mq = 0; mq < C::DQ_ROWS / 16; mq++)
                if (dq_first + 16 * mq < Nq)
                    red_add_dq(acc + 16 * mq * D, D, r_dq[mq], g, t);
        }
    }

    /* Barrier: every warp is done with K and V (dQ reads all of K) and no copy into them is in
     * flight; each warp stages its part of dK (scaled) and dV in them. */
    cp_async_wait<0>();
    __syncthreads();
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int n = 0; n < C::DKV_COLS / 8; n++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const uint32_t at = frag_pair_at<D>(C::KW * wk, cd, mt, n, r);
                st_shared_u32(s_k + at, pack2<T>(r_dk[mt][n][2 * r] * a.scale, r_dk[mt][n][2 * r + 1] * a.scale));
                st_shared_u32(s_v + at, pack2<T>(r_dv[mt][n][2 * r], r_dv[mt][n][2 * r + 1]));
            }
    /* Barrier: the staged rows are visible; warp w stores rows 16w.. below Nk. */
    __syncthreads();
    const int row_w = n0 + 16 * warp;
    const int64_t krow = sq.k0 + row_w;
    uint16_t *g_dk = (uint16_t *)bp.dk + b * bp.dk_batch_stride + hk * bp.dk_head_stride + krow * bp.dk_row_stride;
    uint16_t *g_dv = (uint16_t *)bp.dv + b * bp.dv_batch_stride + hk * bp.dv_head_stride + krow * bp.dv_row_stride;
    store_o_rows<D, 16>(s_k + 16 * warp * D * 2, g_dk, 0, Nk - row_w, d, bp.dk_row_stride, a.vec_dk);
    store_o_rows<D, 16>(s_v + 16 * warp * D * 2, g_dv, 0, Nk - row_w, d, bp.dv_row_stride, a.vec_dv);
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
    /* No query or no key: zeros, which the caller writes. */
    if (p->dtype == FA_FLOAT32 || bwd_width(p->d) == 0 || p->Hq < 1 || p->Nq < 1 || p->Nk < 1 || v.mask != NULL)
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
    a->head_rows = (v.total_q + BWD_ROWS_PAD + 31) / 32 * 32;
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
        int dev;
        fa_device info;
        const int sd = fa_device_current(&dev, &info);
        if (sd != FA_OK)
            return sd;
        if ((size_t)info.smem_optin < sizeof(bwd_smem<__half, bwd_tile_d64>)) {
            if (var)
                return bf16 ? bwd_launch<__nv_bfloat16, bwd_tile_d64_small, true>(&a, stream)
                            : bwd_launch<__half, bwd_tile_d64_small, true>(&a, stream);
            return bf16 ? bwd_launch<__nv_bfloat16, bwd_tile_d64_small, false>(&a, stream)
                        : bwd_launch<__half, bwd_tile_d64_small, false>(&a, stream);
        }
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
