/*
 * sm90_backward.cu — FlashAttention backward for fp16 and bf16 on Hopper (sm_90a): wgmma, TMA and
 * warp specialization.
 *
 * The same three steps as sm80_backward.cu, through the same workspace (backward_rows.cuh): the
 * prep kernel, this file's main kernel, the dq kernel. One CTA per (b, kv head, block of 128 keys)
 * walks every query block (BM rows) of every query head of its group that sees one of its keys:
 *
 *   producer   (warpgroup 0, one thread): K and V of the block once, then per step the Q and dO
 *              tiles of BM rows into a 2-stage ring (TMA; each stage completes on an
 *              mbarrier, full[], and is reused once every consumer warp has released it, empty[]);
 *              it sleeps on empty[] between loads (spinning there, it ran 13 % of the kernel's
 *              instructions, all on the scheduler it shares with two consumer warps); its warp 1
 *              writes the consumers' dQ parts into the accumulator
 *   consumers  (warpgroups 1 and 2): 64 keys each, dK and dV (64 × D) in registers; they also
 *              bring each step's lse₂ and D into shared memory, a step ahead:
 *
 *     Sᵀ = K Qᵀ,  dPᵀ = V dOᵀ                wgmma m64nBMk16, both operands K-major in shared memory
 *                                             (d = 128: dPᵀ accumulated onto −D)
 *     Pᵀ = exp2(Sᵀ · scale · log2 e − lse₂)   masked pairs 0 (only blocks an edge crosses test them)
 *     dSᵀ = Pᵀ ∘ (dPᵀ − D)
 *     dV += Pᵀ dO,  dK += dSᵀ Q               wgmma m64nDk16: Pᵀ and dSᵀ from registers (their C
 *                                             fragments are A fragments), dO and Q MN-major
 *     dSᵀ → shared memory (stmatrix); both consumers meet
 *     dQ part = dS K                          wgmma m64n64k16, both operands MN-major: 64 queries ×
 *                                             64 columns per consumer (d = 128: the consumer's half
 *                                             of the columns; d = 64: its half of the 128 queries)
 *     dQ part → shared memory, where warp 1 of the producer's warpgroup adds it into the workspace's
 *                                             accumulator, laid out in 64 × 64 parts (bwd_acc_at), with
 *                                             one cp.reduce.async.bulk (fp32) of 16 KB
 *   at the end dK (scaled) and dV through K's and V's buffers (stmatrix), each consumer warp's 16 rows
 *              stored by TMA: the CTA's tail is shorter than with 4-byte global stores from the
 *              fragments (+2–13 % at 512–2k keys, −1 to +3.5 % from 4k; bench/LOG.md, 2026-12-04-bwd-tma-store)
 *
 * A step's products overlap: Pᵀ is computed while dPᵀ runs, dV while both consumers meet, dQ
 * beside dV, and dK while the dQ part is stored.
 *
 * Shared tiles are 64-column panels of 128-byte rows in TMA's 128-byte swizzle, as in sm90.cu; dSᵀ
 * is written in the same layout (keys are rows, queries columns). dK is scaled at the end; the dq
 * kernel scales dQ. Variants: both causal alignments and the window (causal is right = 0), sinks
 * (only the prep kernel sees them); softcap, ALiBi, key_mask, packed sequences and attn_mask answer
 * FA_ERR_UNSUPPORTED, as do d > 128, rows that are not 16-byte aligned and GPUs other than 9.0
 * (the sm_80 kernel or the exact path then runs: dispatch.cu). Builds with plain nvcc:
 *     nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -c csrc/cuda/sm90_backward.cu -Icsrc -Icsrc/cuda
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <string.h>

#include "families.h"
#include "ptx.cuh"
#include "ptx_sm90.cuh"
#include "backward_rows.cuh"

#ifndef FA_SM90_BWD_D_EARLY
#define FA_SM90_BWD_D_EARLY 0
#endif

/* A tile: D the compiled head-dim width, BM queries per step; BN = 128 keys, 64 per consumer. */
template <int D_, int BM_>
struct bwd90_tile {
    static constexpr int D = D_, BM = BM_, BN = 128, PANELS = D_ / 64, QPANELS = BM_ / 64, THREADS = 384;
    /* dPᵀ accumulated onto −D (8 shared loads and 16 moves before the step's first wgmma, one
     * multiply an element after it instead of a subtraction and a multiply): at d = 128 +1–3 %, with
     * the stmatrix stores +3.5–8.7 %; at d = 64, with twice the elements, −2–5 % (bench/LOG.md,
     * 2026-12-03-bwd-dsteps). */
    static constexpr bool DP_ONTO_D = D_ == 128;
    /* With DP_ONTO_D: a step's −D loaded from shared memory (where it has been since the step
     * before's barrier) before the wait for its Q and dO stage rather than after it, so that the
     * loads' latency runs beside that wait (they stalled 5.3 k of 123.5 k warp samples before the
     * step's first wgmma at d = 128, causal 4k; bench/LOG.md, 2026-12-04-thirteenth).
     * FA_SM90_BWD_D_EARLY 1; not yet measured: 0. */
    static constexpr bool D_EARLY = DP_ONTO_D && FA_SM90_BWD_D_EARLY;
    static_assert(D * BM == 128 * 64, "one 64 × 64 dQ part per consumer");
};
/* d = 64 takes 128 queries per step (as FlashAttention-3): the step's wgmmas are twice as long. */
typedef bwd90_tile<64, 128> bwd90_d64;
typedef bwd90_tile<128, 64> bwd90_d128;

template <class C>
struct bwd90_smem {
    alignas(1024) uint16_t k[C::PANELS][C::BN][64];
    alignas(1024) uint16_t v[C::PANELS][C::BN][64];
    alignas(1024) uint16_t q[2][C::PANELS][C::BM][64];
    alignas(1024) uint16_t dO[2][C::PANELS][C::BM][64];
    alignas(1024) uint16_t ds[2][C::QPANELS][C::BN][64];  /* dSᵀ, by step parity */
    alignas(128) float dq[2][64 * 64];                     /* each consumer's dQ part, as in the accumulator */
    alignas(16) float lse2[2][C::BM];
    alignas(16) float dd[2][C::BM];
    uint64_t full_kv, full[2], empty[2];
};

typedef struct {
    CUtensorMap tm_q, tm_k, tm_v, tm_do;    /* boxes: Q and dO 64 × BM, K and V 64 × 128 */
    CUtensorMap tm_dk, tm_dv;               /* boxes 64 × 16: a consumer warp's rows of dK and dV */
    bwd_args b;
} bwd90_args;

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FA_SM90_BWD_DEVICE 1
/* TMA's 1-D reduction: global fp32 += shared fp32 over bytes, in this thread's bulk group. */
__device__ __forceinline__ void bulk_add_f32(float *dst, uint32_t src, uint32_t bytes)
{
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n"
                 :: "l"(dst), "r"(src), "r"(bytes) : "memory");
}

__device__ __forceinline__ void bulk_commit(void)
{
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

/* This thread's bulk groups have read their shared memory (READ) or are complete. */
template <bool READ>
__device__ __forceinline__ void bulk_wait(void)
{
    if (READ)
        asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
    else
        asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

/* Generic-proxy writes to shared memory become visible to the async proxy (wgmma, TMA). */
__device__ __forceinline__ void fence_async_smem(void)
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ float2 ld_shared_f2(uint32_t addr)
{
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr) : "memory");
    return v;
}

__device__ __forceinline__ void stsm_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
                 :: "r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}

/* A consumer warp's 16 rows (row16..row16 + 15) of N columns, held as A fragments (pack_frags), into
 * 64-column panels of 128-byte rows, PANEL bytes apart, in TMA's 128-byte swizzle: one stmatrix per
 * 16 columns. Lane L gives a row address of matrix L / 8, row L % 8 of it; matrices 1 and 3 are
 * 8 rows down, 2 and 3 8 columns on (a fragment's a0..a3). */
template <int N, int PANEL>
__device__ __forceinline__ void stsm_rows(uint32_t s, const uint32_t (&f)[N / 16][4], int row16, int lane)
{
    const int r = lane % 8, m = lane / 8;
    const uint32_t base = s + (row16 + r + 8 * (m % 2)) * 128;
#pragma unroll
    for (int kk = 0; kk < N / 16; kk++)
        stsm_x4(base + (kk / 4) * PANEL + (((2 * (kk % 4) + m / 2) ^ r) * 16), f[kk][0], f[kk][1], f[kk][2], f[kk][3]);
}

__device__ __forceinline__ void st_shared_f2(uint32_t addr, float x, float y)
{
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" :: "r"(addr), "f"(x), "f"(y) : "memory");
}

/* Named barriers of a consumer (128 threads) and the dQ writer warp (32): DQ_FULL + cw, its dQ part is
 * in shared memory; DQ_EMPTY + cw, the writer has read it (ids 1: both consumers, 0: the CTA). */
enum { DQ_FULL = 4, DQ_EMPTY = 6 };

__device__ __forceinline__ void dq_bar_sync(int id)
{
    asm volatile("bar.sync %0, 160;\n" :: "r"(id) : "memory");
}

__device__ __forceinline__ void dq_bar_arrive(int id)
{
    asm volatile("bar.arrive %0, 160;\n" :: "r"(id) : "memory");
}

__device__ __forceinline__ void consumers_bar(void)
{
    asm volatile("bar.sync 1, 256;\n" ::: "memory");
}

#endif

/* Grid: 1-D, one CTA per (b·Hkv + kv head, key block), a head's blocks consecutive (the first ones
 * are the heaviest under causal); block: the producer and two consumers. */
template <typename T, class C>
__global__ void __launch_bounds__(C::THREADS, 1)
fa_sm90_backward_kernel(const __grid_constant__ bwd90_args a)
{
#ifdef FA_SM90_BWD_DEVICE
    constexpr int D = C::D, BM = C::BM, BN = C::BN, PANELS = C::PANELS;
    constexpr bool ONTO = C::DP_ONTO_D, D_EARLY = C::D_EARLY;
    extern __shared__ uint8_t smem_raw[];
    bwd90_smem<C> &s = *reinterpret_cast<bwd90_smem<C> *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const bwd_args &ba = a.b;
    const fa_backward_params &bp = ba.bp;
    const fa_params &p = bp.p;
    const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);

    const int64_t blk = ba.first_block + blockIdx.x;
    const int kb = (int)(blk % ba.n_k_blocks);
    const int64_t bhk = blk / ba.n_k_blocks;
    const int b = (int)(bhk / p.Hkv), hk = (int)(bhk % p.Hkv);
    const int Nq = (int)p.Nq, Nk = (int)p.Nk, delta = var_whole(ba.var, p).delta;
    const int left = ba.left, right = ba.right;
    const int n0 = kb * BN, n1 = min(n0 + BN, Nk);
    /* The queries that see one of keys n0..n1−1, as query blocks qb_lo..; step it is head
     * hk·G + it / n_qb, query block qb_lo + it % n_qb. */
    const int q_lo = max(0, n0 - delta - right), q_hi = min(Nq - 1, n1 - 1 - delta + left);
    const int qb_lo = q_lo / BM, n_qb = q_lo <= q_hi ? q_hi / BM - qb_lo + 1 : 0;
    const int G = (int)ba.q_per_kv, n_it = G * n_qb;

    if (threadIdx.x == 0) {
        mbar_init(&s.full_kv, 1);
        for (int i = 0; i < 2; i++)
            mbar_init(&s.full[i], 1), mbar_init(&s.empty[i], 8);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    /* Barrier: the mbarriers are initialised before any thread (or TMA) uses them. */
    __syncthreads();

    if (wg == 0) {
        /* Producer: one thread issues every load; warp 1 writes the consumers' dQ parts. */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
        if (threadIdx.x / 32 == 1) {
            const int lane = threadIdx.x % 32;
            if (n_it > 0) {                             /* both buffers start free */
                dq_bar_arrive(DQ_EMPTY);
                dq_bar_arrive(DQ_EMPTY + 1);
            }
            for (int it = 0; it < n_it; it++) {
                const int h = hk * G + it / n_qb, i0 = (qb_lo + it % n_qb) * BM;
                for (int cw = 0; cw < 2; cw++) {
                    const int q0 = i0 + (D == 128 ? 0 : 64 * cw), col0 = D == 128 ? 64 * cw : 0;
                    float *acc = ba.dq_acc + bwd_acc_at(ba, ((int64_t)b * p.Hq + h) * ba.nq_pad + q0, col0);
                    dq_bar_sync(DQ_FULL + cw);
                    if (lane == 0) {                    /* the part: 16 KB, one reduction */
                        if (q0 < Nq)
                            bulk_add_f32(acc, smem_u32(s.dq[cw]), 64 * 64 * 4);
                        bulk_commit();
                        bulk_wait<true>();
                    }
                    __syncwarp();
                    if (it + 1 < n_it)                  /* every arrival meets a consumer's wait */
                        dq_bar_arrive(DQ_EMPTY + cw);
                }
            }
            bulk_wait<false>();
            return;
        }
        if (threadIdx.x != 0 || n_it == 0)
            return;
        mbar_expect_tx(&s.full_kv, 2 * BN * D * 2);
#pragma unroll
        for (int pn = 0; pn < PANELS; pn++) {
            tma_load(s.k[pn], &a.tm_k, 64 * pn, n0, hk, b, &s.full_kv);
            tma_load(s.v[pn], &a.tm_v, 64 * pn, n0, hk, b, &s.full_kv);
        }
        for (int it = 0; it < n_it; it++) {
            const int st = it & 1;
            const int h = hk * G + it / n_qb, i0 = (qb_lo + it % n_qb) * BM;
            mbar_wait_sleep(&s.empty[st], ((it >> 1) & 1) ^ 1);
            mbar_expect_tx(&s.full[st], 2 * BM * D * 2);
#pragma unroll
            for (int pn = 0; pn < PANELS; pn++) {
                tma_load(s.q[st][pn], &a.tm_q, 64 * pn, i0, h, b, &s.full[st]);
                tma_load(s.dO[st][pn], &a.tm_do, 64 * pn, i0, h, b, &s.full[st]);
            }
        }
        return;
    }

    /* Consumers: cw's keys are n0 + 64cw.., this thread's C rows 16·warp + g (+ 8) of them. */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
    const int cw = wg - 1, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const int key_w = n0 + 64 * cw;
    const int key_r[2] = {key_w + 16 * warp + g, key_w + 16 * warp + g + 8};
    const float c = ba.scale_log2;
    const uint32_t s_k = smem_u32(s.k), s_v = smem_u32(s.v);

    float r_dk[D / 2], r_dv[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; i++)
        r_dk[i] = 0.f, r_dv[i] = 0.f;
    /* lse₂ and D (−D where dPᵀ accumulates onto it) of a step's BM rows reach shared memory through
     * the consumers: thread ct of the 256 reads one (ct < BM: lse₂, else D) from the workspace
     * during the step before and stores it before the step's barrier. (Written there by TMA with the
     * Q tile instead, compute-sanitizer's racecheck reported each TMA write against the consumers'
     * reads of the stage before it, though the mbarrier release orders them, and still did with a
     * proxy fence before each release; d = 128 also ran 1–7 % slower that way. Here a named barrier
     * orders them, which racecheck checks.) */
    const int ct = threadIdx.x - 128;
    int64_t stat_row = ((int64_t)b * p.Hq + hk * G) * ba.nq_pad + qb_lo * BM + ct % BM;   /* step 0's */
    auto stat_at = [&](int64_t row) -> float {
        return ct < BM ? ba.lse2[row] : ba.dd[row];
    };
    auto stat_put = [&](int it, float x) {
        (ct < BM ? s.lse2[it & 1] : s.dd[it & 1])[ct % BM] = ONTO && ct >= BM ? -x : x;
    };
    if (n_it > 0) {
        if (ct < 2 * BM)
            stat_put(0, stat_at(stat_row));
        /* Barrier (both consumers): step 0's lse₂ and D are in. */
        consumers_bar();
        mbar_wait(&s.full_kv, 0);
    }

    int qb = 0;                                             /* it % n_qb, counted rather than divided */
    for (int it = 0; it < n_it; it++) {
        const int st = it & 1;
        const int i0 = (qb_lo + qb) * BM;
        qb = qb + 1 == n_qb ? 0 : qb + 1;
        const uint32_t s_q = smem_u32(s.q[st]), s_do = smem_u32(s.dO[st]);
        if (!D_EARLY)
            mbar_wait(&s.full[st], (it >> 1) & 1);
        const bool stat_next = it + 1 < n_it && ct < 2 * BM;
        /* Step it + 1's row from step it's: the next query block, or the next head's first (qb is
         * already step it + 1's). */
        stat_row += qb == 0 ? (int64_t)ba.nq_pad - (int64_t)(n_qb - 1) * BM : BM;
        const float stat = stat_next ? stat_at(stat_row) : 0.f;

        /* Sᵀ = K Qᵀ and dPᵀ = V dOᵀ (64 keys × BM queries), one commit group each, D/16 k-steps
         * down the panels: the softmax of Sᵀ runs while dPᵀ is computed. */
        auto pair = [&](const float (&x)[2][BM], int j) {   /* this thread's two columns of group j */
            return ld_shared_f2(smem_u32(&x[st][8 * j + 2 * t]));
        };
        float r_s[BM / 2], r_dp[BM / 2];
        if (ONTO) {
            /* dPᵀ accumulates onto −D, so the wgmma leaves dPᵀ − D (written before any wgmma is in
             * flight: between two, ptxas waits for the first). */
#pragma unroll
            for (int j = 0; j < BM / 8; j++) {
                const float2 nd = pair(s.dd, j);
                r_dp[4 * j] = nd.x, r_dp[4 * j + 1] = nd.y, r_dp[4 * j + 2] = nd.x, r_dp[4 * j + 3] = nd.y;
            }
            reg_fence(r_dp);
        }
        if (D_EARLY)                                        /* step it's Q and dO (C::D_EARLY) */
            mbar_wait(&s.full[st], (it >> 1) & 1);
        wgmma_fence();
        issue_ab_t<T, D, BM, BN * 128, BM * 128>(r_s, s_k + 64 * cw * 128, s_q);
        issue_ab_t<T, D, BM, BN * 128, BM * 128, ONTO>(r_dp, s_v + 64 * cw * 128, s_do);

        /* Pᵀ. Element 4j + 2r + e: key key_r[r], query i0 + 8j + 2t + e. Rows past Nq have
         * lse₂ = +inf (P = 0); keys past Nk and pairs outside the window are masked here. This
         * thread's lse₂ (and D below) are read before the wait where registers allow (d = 128; after
         * the wait they stalled the first FFMAs; at d = 64 the 32 more registers would spill). */
        constexpr bool EARLY = BM == 64;
        float2 l2v[BM / 8], ddv[BM / 8];
        if (EARLY)
#pragma unroll
            for (int j = 0; j < BM / 8; j++)
                l2v[j] = pair(s.lse2, j);
        wgmma_wait<1>();
        reg_fence(r_s);
        const bool full = key_w + 63 < Nk && key_w >= i0 + BM - 1 + delta - left && key_w + 63 <= i0 + delta + right;
        /* Blocks no edge crosses in a loop of their own: with the test inside one loop, ptxas
         * predicated each element's mask test (about 180 instructions a step, run on every block). */
        if (full) {
#pragma unroll
            for (int j = 0; j < BM / 8; j++) {
                const float2 l2 = EARLY ? l2v[j] : pair(s.lse2, j);
#pragma unroll
                for (int x = 0; x < 4; x++)
                    r_s[4 * j + x] = ex2(fmaf(r_s[4 * j + x], c, -(x % 2 ? l2.y : l2.x)));
            }
        } else {
#pragma unroll
            for (int j = 0; j < BM / 8; j++) {
                const float2 l2 = EARLY ? l2v[j] : pair(s.lse2, j);
#pragma unroll
                for (int x = 0; x < 4; x++) {
                    const int e = x % 2;
                    float pr = ex2(fmaf(r_s[4 * j + x], c, -(e ? l2.y : l2.x)));
                    if (!full) {
                        const int i = i0 + 8 * j + 2 * t + e, kj = key_r[x / 2];
                        if (!(kj < Nk && kj >= i + delta - left && kj <= i + delta + right))
                            pr = 0.f;
                    }
                    r_s[4 * j + x] = pr;
                }
            }
        }
        /* dSᵀ = Pᵀ ∘ (dPᵀ − D). */
        if (EARLY && !ONTO)
#pragma unroll
            for (int j = 0; j < BM / 8; j++)
                ddv[j] = pair(s.dd, j);
        wgmma_wait<0>();
        reg_fence(r_dp);
        if (ONTO) {
#pragma unroll
            for (int i = 0; i < BM / 2; i++)
                r_dp[i] *= r_s[i];
        } else {
#pragma unroll
            for (int j = 0; j < BM / 8; j++) {
                const float2 dd = EARLY ? ddv[j] : pair(s.dd, j);
#pragma unroll
                for (int x = 0; x < 4; x++)
                    r_dp[4 * j + x] = r_s[4 * j + x] * (r_dp[4 * j + x] - (x % 2 ? dd.y : dd.x));
            }
        }
        uint32_t r_p[BM / 16][4], r_ds[BM / 16][4];
        pack_frags<T, BM>(r_p, r_s);
        pack_frags<T, BM>(r_ds, r_dp);

        /* dSᵀ into buffer it & 1 (row 64cw + 16·warp + g (+ 8) = key, column = query, swizzled) with
         * one stmatrix per 16 queries (+0.7–1.7 % over 32-bit stores). */
        const uint32_t s_ds = smem_u32(s.ds[st]);
        stsm_rows<BM, BN * 128>(s_ds, r_ds, 64 * cw + 16 * warp, lane);
        fence_async_smem();

        /* dV += Pᵀ dO: BM/16 k-steps of 16 queries (2 KB of each panel). Issued with Pᵀ before dSᵀ
         * is formed instead, it ran 1–5 % slower (ptxas spilled at d = 128). */
        const uint64_t d_do2 = wgmma_desc(s_do, BM * 128), d_q2 = wgmma_desc(s_q, BM * 128);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BM / 16; kk++)
            wgmma_rs<D, T>(r_dv, r_p[kk], desc_at(d_do2, kk * 2048), 1);
        wgmma_commit();

        /* Step it + 1's lse₂ and D into the other buffer, whose readers (step it − 1's) are past the
         * last barrier. Barrier (both consumers): dSᵀ of all 128 keys is in, and those statistics.
         * The other dSᵀ buffer was last read by step it − 1's dQ, which both consumers waited for
         * before this barrier. */
        if (stat_next)
            stat_put(it + 1, stat);
        consumers_bar();

        /* dQ part = dS K over the 128 keys: A = dSᵀ panel qa (MN-major), B = K panel kp (MN-major). */
        float r_dq[32];
        {
            const int qa = D == 128 ? 0 : cw, kp = D == 128 ? cw : 0;
            const uint64_t d_a = wgmma_desc(s_ds + qa * (BN * 128), BN * 128);
            const uint64_t d_b = wgmma_desc(s_k + kp * (BN * 128), BN * 128);
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++)
                wgmma_ss_mn<64, T>(r_dq, desc_at(d_a, kk * 2048), desc_at(d_b, kk * 2048), kk > 0);
            wgmma_commit();
        }
        wgmma_wait<1>();                                    /* dV is done: Pᵀ's registers are free */
        reg_fence(r_dv);
        reg_fence_u(r_p);

        /* dK += dSᵀ Q. */
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BM / 16; kk++)
            wgmma_rs<D, T>(r_dk, r_ds[kk], desc_at(d_q2, kk * 2048), 1);
        wgmma_commit();
        wgmma_wait<1>();                                    /* dQ is done */
        reg_fence(r_dq);

        /* The dQ part to shared memory for the writer warp, once it has read the previous one. */
        const uint32_t s_dq = smem_u32(s.dq[cw]);
        dq_bar_sync(DQ_EMPTY + cw);
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int row = 16 * warp + g + 8 * r;      /* row % 8 == g */
                st_shared_f2(s_dq + 4 * (row * 64 + ((j ^ g) * 8) + 2 * t), r_dq[4 * j + 2 * r], r_dq[4 * j + 2 * r + 1]);
            }
        fence_async_smem();
        dq_bar_arrive(DQ_FULL + cw);

        wgmma_wait<0>();                                    /* dK is done */
        reg_fence(r_dk);
        reg_fence_u(r_ds);
        /* Step it's stage is no longer read: one arrival per warp. */
        __syncwarp();
        if (lane == 0)
            mbar_arrive(&s.empty[st]);
    }

    /* dK (scaled) and dV through K's and V's buffers, each warp's 16 rows stored by TMA as soon as the
     * warp has written them (rows past Nk and columns past d dropped; with a barrier over the
     * consumer and one thread storing all 64 rows, ptxas rematerialised the dQ stores' addresses in
     * the main loop, 67 instructions a step, d = 128 1–5 % slower from 4k keys). Barrier (both
     * consumers): the other consumer's last dQ has read all of K. Written as dSᵀ is (keys are rows
     * here too). */
    consumers_bar();
#pragma unroll
    for (int i = 0; i < D / 2; i++)
        r_dk[i] *= ba.scale;
    {
        uint32_t f_dk[D / 16][4], f_dv[D / 16][4];
        pack_frags<T, D>(f_dk, r_dk);
        pack_frags<T, D>(f_dv, r_dv);
        stsm_rows<D, BN * 128>(s_k, f_dk, 64 * cw + 16 * warp, lane);
        stsm_rows<D, BN * 128>(s_v, f_dv, 64 * cw + 16 * warp, lane);
    }
    /* The TMA engine reads what the generic proxy wrote: fence, then the warp's lanes meet. */
    fence_async_smem();
    __syncwarp();
    const int row0 = key_w + 16 * warp;
    if (lane == 0 && row0 < Nk) {
#pragma unroll
        for (int pn = 0; pn < PANELS; pn++) {
            tma_store(&a.tm_dk, &s.k[pn][64 * cw + 16 * warp][0], 64 * pn, row0, hk, b);
            tma_store(&a.tm_dv, &s.v[pn][64 * cw + 16 * warp][0], 64 * pn, row0, hk, b);
        }
        bulk_commit();
        bulk_wait<true>();                                  /* shared memory outlives the reads */
    }
#endif
}

/* ---- Host ---------------------------------------------------------------------------------- */

template <typename T, class C>
static int bwd90_launch(bwd90_args *a, cudaStream_t stream)
{
    void (*kernel)(const bwd90_args) = fa_sm90_backward_kernel<T, C>;
    const size_t smem = sizeof(bwd90_smem<C>) + 1024;      /* + alignment of the base to 1024 */
    static unsigned s_checked, s_ok;
    int dev;
    fa_device info;
    int st = fa_device_current(&dev, &info);
    if (st != FA_OK)
        return st;
    if (info.major != 9 || info.minor != 0 || smem > (size_t)info.smem_optin)
        return FA_ERR_UNSUPPORTED;
    /* Once per device (bit dev; devices past 31 every call): an sm_90a build of this kernel, and
     * the dynamic shared memory raised. */
    if (dev >= 32 || !((__atomic_load_n(&s_checked, __ATOMIC_ACQUIRE) >> dev) & 1u)) {
        cudaFuncAttributes attr;
        FA_CUDA_TRY(cudaFuncGetAttributes(&attr, kernel));
        const int ok = attr.binaryVersion == 90;
        if (ok)
            FA_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        if (dev < 32) {
            if (ok)
                __atomic_fetch_or(&s_ok, 1u << dev, __ATOMIC_RELAXED);
            __atomic_fetch_or(&s_checked, 1u << dev, __ATOMIC_RELEASE);
        }
        if (!ok)
            return FA_ERR_UNSUPPORTED;
    } else if (!((__atomic_load_n(&s_ok, __ATOMIC_RELAXED) >> dev) & 1u)) {
        return FA_ERR_UNSUPPORTED;
    }
    bwd_args *ba = &a->b;
    const fa_params *p = &ba->bp.p;
    const int bf16 = p->dtype == FA_BFLOAT16;
    const fa_backward_params *bp = &ba->bp;
    if (make_map(&a->tm_q, bf16, p->q, p->B, p->Hq, p->Nq, p->d, p->q_batch_stride, p->q_head_stride,
                 p->q_row_stride, C::BM)
        || make_map(&a->tm_do, bf16, bp->dout, p->B, p->Hq, p->Nq, p->d, bp->do_batch_stride, bp->do_head_stride,
                    bp->do_row_stride, C::BM)
        || make_map(&a->tm_k, bf16, p->k, p->B, p->Hkv, p->Nk, p->d, p->k_batch_stride, p->k_head_stride,
                    p->k_row_stride, C::BN)
        || make_map(&a->tm_v, bf16, p->v, p->B, p->Hkv, p->Nk, p->d, p->v_batch_stride, p->v_head_stride,
                    p->v_row_stride, C::BN)
        || make_map(&a->tm_dk, bf16, bp->dk, p->B, p->Hkv, p->Nk, p->d, bp->dk_batch_stride, bp->dk_head_stride,
                    bp->dk_row_stride, 16)
        || make_map(&a->tm_dv, bf16, bp->dv, p->B, p->Hkv, p->Nk, p->d, bp->dv_batch_stride, bp->dv_head_stride,
                    bp->dv_row_stride, 16))
        return FA_ERR_UNSUPPORTED;
    st = bwd_prep(ba, stream);
    if (st != FA_OK)
        return st;
    ba->n_k_blocks = (p->Nk + C::BN - 1) / C::BN;
    const int64_t total = ba->n_k_blocks * p->B * p->Hkv;
    ba->n_blocks = total;
    for (int64_t first = 0; first < total; first += INT32_MAX) {
        ba->first_block = first;
        const int64_t n = total - first < INT32_MAX ? total - first : INT32_MAX;
        kernel<<<(unsigned)n, C::THREADS, smem, stream>>>(*a);
        FA_CUDA_TRY(cudaGetLastError());
    }
    return bwd_dq(ba, stream);
}

extern "C" int fa_sm90_backward(const fa_backward_params *bp, const fa_variants *v, void *workspace,
                                size_t workspace_bytes, cudaStream_t stream)
{
    bwd90_args a;
    memset(&a, 0, sizeof a);
    int st = bwd_prepare(bp, v, &a.b);
    if (st != FA_OK)
        return st;
    const fa_params *p = &bp->p;
    /* The variants this kernel does not compute, and what TMA and its stores need. */
    if (a.b.cap_in != 0.f || a.b.var.v.alibi_slopes != NULL || a.b.var.v.key_mask != NULL || a.b.packed
        || !a.b.vec_load || !a.b.vec_dk || !a.b.vec_dv || p->B > INT32_MAX || p->Hq > INT32_MAX)
        return FA_ERR_UNSUPPORTED;
    st = bwd_bind(&a.b, workspace, workspace_bytes);
    if (st != FA_OK)
        return st;
    a.b.dq_tiled = 1;
    const int bf16 = p->dtype == FA_BFLOAT16;
    if (a.b.D == 64)
        return bf16 ? bwd90_launch<__nv_bfloat16, bwd90_d64>(&a, stream) : bwd90_launch<__half, bwd90_d64>(&a, stream);
    return bf16 ? bwd90_launch<__nv_bfloat16, bwd90_d128>(&a, stream) : bwd90_launch<__half, bwd90_d128>(&a, stream);
}
