/*
 * sm90.cu — FlashAttention forward for fp16 and bf16 on Hopper (sm_90a): wgmma, TMA and warp
 * specialization.
 *
 * One CTA owns BM query rows of one (batch, head) and has 1 + BM/64 warpgroups:
 *
 *   producer   (warpgroup 0, few registers): one thread issues the TMA loads of the Q tile and of
 *              the K and V blocks into STAGES-deep rings; each load completes on an mbarrier
 *              (full_*), and a stage is reused once both consumers have released it (empty_*).
 *   consumers  (warpgroups 1.., most registers): 64 query rows each, O and the softmax state in
 *              registers; c = scale · log2(e):
 *
 *     S = Q Kᵀ                                  wgmma m64nBNk16, Q and K from shared memory
 *     m_new = max(m_i, rowmax(S))
 *     P = exp2(S·c − m_new·c)                   one FFMA and one ex2 per element
 *     l_i = l_i · exp2((m_i − m_new)·c) + rowsum(P)
 *     O = O · exp2((m_i − m_new)·c) + P V       wgmma m64nDk16, P from registers, V transposed
 *     O /= l_i,  lse = (m_i·c + log2 l_i) · ln 2  at the end; O leaves through a TMA store
 *
 * Shared tiles are 64-column panels of 128-byte rows in TMA's 128-byte swizzle (16-byte chunk c
 * of row r at chunk c ^ (r mod 8)), which is also the layout wgmma's descriptors read. TMA
 * zero-fills rows past Nq/Nk and columns past d, so tails and head dims below the compiled width
 * (64, 128, 256) need no special loads; only the scores of tail and diagonal blocks are masked.
 *
 * Reached through fa_sm90_forward() and, with variants, fa_sm90_forward_variants() (the CUDA
 * dispatcher, after fa_check_params); anything it does not take (negative scale, rows not 16-byte
 * aligned, zero strides) answers FA_ERR_UNSUPPORTED and runs on the sm_80 kernel. Tensor maps are
 * encoded through the driver entry point: nothing links libcuda.
 *
 * Where the rest lives: the tile shapes and their measured reasons in tiles.h, the Hopper PTX
 * wrappers in ptx_sm90.cuh (wgmma instructions: wgmma.cuh, generated), the grid and walk rules in
 * plan.c, the tools' timing hooks in trace.cuh, the variants' steps (VAR) in variants.cuh.
 * This file, in order: kernel arguments and shared memory, consumer steps, the kernel (producer,
 * consumers, split-tile merge), host launch. Builds with plain nvcc:
 *     nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -c csrc/cuda/sm90.cu -Icsrc -Icsrc/cuda
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "families.h"
#include "plan.h"
#include "dtype.cuh"
#include "ptx.cuh"
#include "ptx_sm90.cuh"
#include "tiles.h"
#include "softmax.cuh"
#include "trace.cuh"

/* ---- Kernel arguments and shared memory ---------------------------------------------------- */

/* Division by a divisor fixed at launch, for the tile positions (tile_pos): for 0 <= n < 2³¹,
 * n / d = umulhi(n, mul) >> shift with mul = ceil(2^(31 + l) / d) < 2³², l = ceil(log2 d),
 * shift = l − 1 (d = 1: n itself). Granlund and Montgomery's method; with the 64-bit divisions it
 * replaces, finding the next tile took each consumer 0.55 µs, now 0.25-0.30 (tools/sm90/trace.py,
 * H200). */
typedef struct {
    uint32_t d, mul, shift;
} sm90_divisor;

static sm90_divisor sm90_divisor_make(uint32_t d)
{
    sm90_divisor x = {d, 0, 0};
    if (d > 1) {
        uint32_t l = 0;
        while ((1ull << l) < d)
            l++;
        x.mul = (uint32_t)(((1ull << (31 + l)) + d - 1) / d);
        x.shift = l - 1;
    }
    return x;
}

/* Kernel arguments: four TMA descriptors (4-D: column, row, head, batch) and the caller's
 * params with scalars derived on the host. */
typedef struct {
    CUtensorMap tm_q, tm_k, tm_v, tm_o;  /* boxes: Q 64 × BM, K and V 64 × BN, O 64 × 64 */
    fa_params p;
    float scale_log2;                    /* scale · log2(e), at least FLT_MIN */
    int64_t n_q_tiles;                   /* ceil(Nq / BM) */
    int64_t n_tiles;                     /* B · Hq · n_q_tiles, less than 2²⁹ (sm90_launch) */
    /* Head-major order (tile_pos): tiles below n_full walk each head's query tiles in turn
     * (div_full_q.d of them per head); the tiles past them, if any, are the heads' last query
     * tiles, one per head, moved to the end (plan.c, fa_plan_sm90_walk). */
    int64_t n_full;
    sm90_divisor div_q_tiles, div_full_q, div_bh, div_hq, div_q_per_kv;  /* n_q_tiles, n_full_q,
                                                                             B · Hq, Hq, Hq / Hkv */
    int64_t tile_stride;                 /* persistent: the grid size; else n_tiles (one tile per CTA) */
    int snake;                           /* every other pass of the grid runs backwards: cta_tile */
    /* Work items (item_pos): items below n_whole are whole tiles; the n_split items past them are
     * the parts of the next n_split / parts tiles, split along the keys (the last, partly filled
     * round of a persistent grid), which store (O / l, lse) in fp32 to o_part / lse_part for
     * fa_sm90_merge_kernel; the items after those are whole tiles again. parts = 1: no split,
     * n_items = n_whole = n_tiles. */
    int64_t n_items, n_whole, n_split;
    int parts;
    float *o_part;                       /* (tail item, BM rows, d) */
    float *lse_part;                     /* (tail item, BM rows), log2 units */
} sm90_args;

/* The attn_mask ring of sm90_tile_mask (block j in stage j % STAGES, as K); none for other tiles. */
template <int STAGES, int BM, int BN>
struct sm90_mask_ring {
    alignas(1024) uint16_t m[STAGES][BN / 64][BM][64];
};
template <int BM, int BN>
struct sm90_mask_ring<0, BM, BN> {
};

/* Shared memory of one CTA; every tile starts on a 1024-byte swizzle atom. Panel p of a tile holds
 * its columns 64p..64p+63, rows 128 bytes apart. */
template <class C>
struct sm90_smem {
    alignas(1024) uint16_t q[C::QBUFS][C::PANELS][C::BM][64];  /* Q; then each consumer's O */
    alignas(1024) uint16_t k[C::STAGES][C::PANELS][C::BN][64]; /* K ring: block j in stage j % STAGES */
    alignas(1024) uint16_t v[C::STAGES][C::PANELS][C::BN][64]; /* V ring, same stage as K */
    uint64_t full_q[C::QBUFS];                                 /* Q landed (TMA bytes) */
    uint64_t empty_q[C::QBUFS];                                /* O stored by every consumer */
    uint64_t full_k[C::STAGES], full_v[C::STAGES];             /* stage landed (TMA bytes) */
    uint64_t empty_k[C::STAGES], empty_v[C::STAGES];           /* stage released by every consumer warp */
    sm90_mask_ring<C::MASK_STAGES, C::BM, C::BN> mask;         /* attn_mask ring, landing with K (last:
                                                                  the other tiles' offsets stay) */
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FA_SM90_DEVICE 1    /* the sm_90a pass; other targets compile an empty kernel */
#endif

#include "sm90_variants.cuh"

#ifdef FA_SM90_DEVICE
/* ---- Consumer steps ------------------------------------------------------------------------ */

/* S = Q Kᵀ (64 × BN) issued as D/16 wgmmas down the panels, 32 bytes of Q and K each; s_q: this
 * warpgroup's rows of Q panel 0, s_k: the K stage. Completes at the next wgmma_wait. */
template <typename T, class C>
__device__ __forceinline__ void issue_qk(float (&r_s)[C::BN / 2], uint32_t s_q, uint32_t s_k)
{
    wgmma_fence();
    issue_ab_t<T, C::D, C::BN, C::BM * 128, C::BN * 128>(r_s, s_q, s_k);
}

/* O += P V issued as BN/16 wgmmas; V (keys × D, panels BN·128 bytes apart) is the MN-major B
 * operand, 16 keys = 2 KB of each panel per wgmma. */
template <typename T, class C>
__device__ __forceinline__ void issue_pv(float (&r_o)[C::D / 2], const uint32_t (&r_p)[C::BN / 16][4],
                                         uint32_t s_v)
{
    const uint64_t d_v = wgmma_desc(s_v, C::BN * 128);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < C::BN / 16; kk++)
        wgmma_rs<C::D, T>(r_o, r_p[kk], desc_at(d_v, kk * 16 * 128), 1);
    wgmma_commit();
}

/* This warp is done with a stage: one arrival per warp (the empty barriers count them all). */
__device__ __forceinline__ void release(uint64_t *bar, int lane)
{
    __syncwarp();
    if (lane == 0)
        mbar_arrive(bar);
}

/* The CTA's ring block j (its K and V stages), released untouched once it has landed. */
template <class C>
__device__ __forceinline__ void release_landed(sm90_smem<C> &s, int j, int lane)
{
    const int st = j % C::STAGES;
    const uint32_t parity = (j / C::STAGES) & 1;
    mbar_wait(&s.full_k[st], parity);
    release(&s.empty_k[st], lane);
    mbar_wait(&s.full_v[st], parity);
    release(&s.empty_v[st], lane);
}

/* What the softmax of a block needs to know about this thread's rows. */
typedef struct {
    int Nk, causal;
    int row_first;          /* the warpgroup's first query row */
    int row0;               /* this thread's rows: row0, row0 + 8 */
    int t;                  /* lane % 4: columns 2t, 2t + 1 of each 8-column tile */
    float c;                /* scale · log2(e) */
} sm90_softmax_ctx;

/* The online softmax of the block of keys key0..key0+BN−1, in place:
 *     S = −inf where key >= Nk or (causal) key > row     (tail and diagonal blocks only)
 *     m_new = max(m_i, rowmax(S)),  alpha = exp2((m_i − m_new)·c)   (0 on the first block)
 *     P = exp2(S·c − m_new·c),  l_i = l_i·alpha + rowsum(P)  (this thread's columns)
 * r_s: element i is (row row0 + 8·((i/2)%2), key key0 + 8·(i/4) + 2t + i%2). */
template <class C, bool VAR = false>
__device__ __forceinline__ void sm90_softmax(float (&r_s)[C::BN / 2], float (&m_i)[2], float (&l_i)[2],
                                             float (&alpha)[2], int key0, const sm90_softmax_ctx &x)
{
    constexpr int BN = C::BN;
    /* VAR: S arrives masked (var_scores), in log2 units with c = 1 or raw with c the scale's,
     * and a row may have seen no key yet (m = −inf): P = 0 then, and nothing to rescale. */
    if (!VAR && (key0 + BN > x.Nk || (x.causal && key0 + BN - 1 > x.row_first))) {
#pragma unroll
        for (int i = 0; i < BN / 2; i++) {
            const int key = key0 + 8 * (i / 4) + 2 * x.t + i % 2;
            const int row = x.row0 + 8 * ((i / 2) % 2);
            if (key >= x.Nk || (x.causal && key > row))
                r_s[i] = -INFINITY;
        }
    }
    float mc[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {                       /* a row lives on the 4 lanes of a quad */
        float m = m_i[r];
#pragma unroll
        for (int j = 0; j < BN / 8; j++)
            m = fmaxf(m, fmaxf(r_s[4 * j + 2 * r], r_s[4 * j + 2 * r + 1]));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
        /* Lazy: the running max moves only when the block's max passes it by more than
         * FA_SM90_LAZY (log2 units; the first block, NaN and inf always move it), so P stays
         * at most 2^FA_SM90_LAZY and O needs no rescale (alpha = 1). */
        if (VAR && m == -INFINITY) {
            alpha[r] = 1.f;
        } else if (FA_SM90_LAZY == 0 || !((m - m_i[r]) * x.c <= (float)FA_SM90_LAZY)) {
            alpha[r] = ex2((m_i[r] - m) * x.c);
            l_i[r] *= alpha[r];
            m_i[r] = m;
        } else {
            alpha[r] = 1.f;
        }
        mc[r] = VAR && m == -INFINITY ? 0.f : m_i[r] * x.c;
    }
#pragma unroll
    for (int i = 0; i < BN / 2; i++) {
        r_s[i] = ex2(fmaf(r_s[i], x.c, -mc[(i / 2) % 2]));
        l_i[(i / 2) % 2] += r_s[i];
    }
}

/* Ends the basic block after the softmax with a branch on its result (never taken: l_i >= 0 or
 * NaN). Without it ptxas hoists the next wgmma wait (WARPGROUP.DEPBAR) above the softmax, which
 * then runs after O += P V has completed instead of beside it. That costs the d = 256 tile 5 %;
 * at d <= 128 the other warpgroups' turns keep the tensor cores as busy either way. */
#ifndef FA_SM90_SOFTMAX_FENCE       /* 1 on every tile, 0 on none; default: C::SOFTMAX_FENCE */
#define FA_SM90_SOFTMAX_FENCE -1
#endif
template <class C>
__device__ __forceinline__ void softmax_done(const float (&l_i)[2])
{
    constexpr bool on = FA_SM90_SOFTMAX_FENCE < 0 ? C::SOFTMAX_FENCE : FA_SM90_SOFTMAX_FENCE > 0;
    if (on && (l_i[0] < 0.f || l_i[1] < 0.f))
        asm volatile("nanosleep.u32 0;\n" ::: "memory");
}

/* O ·= alpha, row by row. Skipping it where every alpha is exactly 1 (no row's max moved)
 * changes no bit of O. On long rows the max rarely moves: after j blocks of random scores a row's
 * max moves with probability 1/(j+1), so at 4k keys about half the blocks move some max of a
 * warp's 16 rows, at 16k a quarter. RESCALE_SKIP 1: the warp votes as a whole; 2: its two groups
 * of 8 rows (each thread's alpha[0] and alpha[1]) vote apart, so a block where one group's max
 * moved rescales half of O; 0: never skipped. */
#ifndef FA_SM90_RESCALE_SKIP        /* 0, 1 or 2 on every tile; default: C::RESCALE_SKIP */
#define FA_SM90_RESCALE_SKIP -1
#endif
template <class C>
__device__ __forceinline__ void rescale(float (&r_o)[C::D / 2], const float (&alpha)[2])
{
    constexpr int skip = FA_SM90_RESCALE_SKIP < 0 ? C::RESCALE_SKIP : FA_SM90_RESCALE_SKIP;
    if (skip == 2) {
#pragma unroll
        for (int h = 0; h < 2; h++)
            if (__any_sync(0xffffffffu, alpha[h] != 1.f)) {
#pragma unroll
                for (int i = 2 * h; i < C::D / 2; i += 4) {       /* the columns of rows g + 8h */
                    r_o[i] *= alpha[h];
                    r_o[i + 1] *= alpha[h];
                }
            }
        return;
    }
    if (skip == 1 && !__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f))
        return;
#pragma unroll
    for (int i = 0; i < C::D / 2; i++)
        r_o[i] *= alpha[(i / 2) % 2];
}

#endif /* FA_SM90_DEVICE */

/* ---- Kernel -------------------------------------------------------------------------------- */

/* Grid: 1-D, one CTA per tile or one per SM (sm90_persistent); block: the producer and
 * C::CONSUMERS warpgroups. */
/* Where a tile is: (b·Hq + h, query tile), tiles of one head next to each other (they share K
 * and V in L2). Causal runs each head's heaviest tiles (most keys) first. Persistent and causal,
 * a plain stride through that order would be unbalanced (with a stride that is a multiple of the
 * tiles per head, a CTA gets only the heaviest or only the lightest), so the head-major order is
 * walked as a snake (cta_tile). Keys past the tile's last row, masked for all its rows, are never loaded. */
typedef struct {
    int64_t bh;
    int b, h, hk, m0, n_blocks;
} sm90_tile_pos;

__device__ __forceinline__ uint32_t fast_div(const sm90_divisor &x, uint32_t n)
{
    return x.d == 1 ? n : __umulhi(n, x.mul) >> x.shift;
}

template <class C>
__device__ __forceinline__ sm90_tile_pos tile_pos(const sm90_args &a, int64_t tile)
{
    sm90_tile_pos tp;
    const uint32_t t = (uint32_t)tile;
    uint32_t rank, bh;
    if (t < (uint32_t)a.n_full) {
        bh = fast_div(a.div_full_q, t);
        rank = t - bh * a.div_full_q.d;
    } else {                                            /* a head's last query tile, moved last */
        bh = t - (uint32_t)a.n_full;
        rank = a.div_q_tiles.d - 1;
    }
    tp.bh = bh;
    tp.m0 = (int)(a.p.causal ? a.div_q_tiles.d - 1 - rank : rank) * C::BM;
    tp.b = (int)fast_div(a.div_hq, bh);
    tp.h = (int)(bh - (uint32_t)tp.b * a.div_hq.d);
    tp.hk = (int)fast_div(a.div_q_per_kv, (uint32_t)tp.h);
    const int kv_end = a.p.causal ? min((int)a.p.Nk, tp.m0 + C::BM) : (int)a.p.Nk;
    tp.n_blocks = (kv_end + C::BN - 1) / C::BN;
    return tp;
}

/* A work item: its tile, the key blocks [kb0, kb0 + nb) it reads, and for a part of a split
 * tile its index among the tail items (j, else −1). SPLIT = false (a launch with no split tiles):
 * the whole tile, known at compile time, so the kernel is the one without the split. */
typedef struct {
    sm90_tile_pos tp;
    int kb0, nb;
    int64_t j;
} sm90_item;

template <class C, bool SPLIT>
__device__ __forceinline__ sm90_item item_pos(const sm90_args &a, int64_t item)
{
    sm90_item w;
    if (!SPLIT) {
        w.tp = tile_pos<C>(a, item);
        w.j = -1;
        w.kb0 = 0;
        w.nb = w.tp.n_blocks;
        return w;
    }
    const int64_t j = item - a.n_whole;
    const bool split = j >= 0 && j < a.n_split;
    w.tp = tile_pos<C>(a, j < 0 ? item
                          : split ? a.n_whole + j / a.parts
                                  : item - a.n_split + a.n_split / a.parts);
    w.j = split ? j : -1;
    const int part = split ? (int)(j % a.parts) : 0, parts = split ? a.parts : 1;
    w.kb0 = part * w.tp.n_blocks / parts;
    w.nb = (part + 1) * w.tp.n_blocks / parts - w.kb0;
    return w;
}

/* This CTA's it-th tile (n_tiles or more once it has none left). Pass it of the grid over the
 * tile sequence covers it·tile_stride onwards, CTA c taking its c-th tile; with
 * a.snake odd passes run backwards, so a CTA that took a heavy tile then takes a light one. A pass
 * lies wholly after the previous one, so the first tile past the end ends the walk. */
__device__ __forceinline__ int64_t cta_tile(const sm90_args &a, int it)
{
    const int64_t c = blockIdx.x;
    return (int64_t)it * a.tile_stride + (a.snake && (it & 1) ? a.tile_stride - 1 - c : c);
}

template <typename T, class C, bool SPLIT, int VAR>
__global__ void __launch_bounds__(C::THREADS, 1)
fa_sm90_forward_kernel(const __grid_constant__ typename sm90_kargs<VAR>::type a)
{
#ifdef FA_SM90_DEVICE
    constexpr int D = C::D, BM = C::BM, BN = C::BN, STAGES = C::STAGES, PANELS = C::PANELS;
    constexpr bool STORE_DEFER = FA_SM90_STORE_DEFER && C::QBUFS == 2;
    constexpr bool MSMEM = C::MASK_STAGES > 0;                  /* attn_mask blocks land with K's */
    static_assert(!MSMEM || VAR == FA_VAR_ALL, "a staged mask is a variant");
    extern __shared__ uint8_t smem_raw[];
    sm90_smem<C> &s = *reinterpret_cast<sm90_smem<C> *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);

    const fa_params &p = a.p;
    const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);   /* warp-uniform to the compiler */
    /* VAR: this CTA's sequence (packed calls run one tile per CTA; var_packed_tile). */
    fa_var_seq seq{};
    if constexpr (VAR)
        seq = a.var.v.cu_seqlens_q != NULL ? var_seq(a.var, p, item_pos<C, SPLIT>(a, cta_tile(a, 0)).tp.b)
                                           : var_whole(a.var, p);
    const int Nq = VAR ? seq.Nq : (int)p.Nq, Nk = VAR ? seq.Nk : (int)p.Nk;

    /* VAR with key_mask: each batch entry's key range (var_keys_rows), after the struct when the
     * launch gave it room (a.key_rows), scanned by every warp before the roles part. */
    const uint32_t keys = smem_u32(&s + 1);
    if constexpr (VAR) {
        if (a.key_rows) {                                   /* one tile per CTA: its own row only */
            const bool one = a.tile_stride >= a.n_items;
            const int64_t b0 = one ? item_pos<C, SPLIT>(a, cta_tile(a, 0)).tp.b : 0;
            var_keys_rows(a.var, p, reinterpret_cast<uint2 *>(&s + 1), b0, one ? b0 + 1 : p.B, threadIdx.x / 32,
                          C::THREADS / 32);
        }
    }
    if (threadIdx.x == 0) {
        for (int i = 0; i < C::QBUFS; i++)
            mbar_init(&s.full_q[i], 1), mbar_init(&s.empty_q[i], C::CONSUMERS);
        for (int i = 0; i < STAGES; i++) {
            mbar_init(&s.full_k[i], 1), mbar_init(&s.full_v[i], 1);
            mbar_init(&s.empty_k[i], 4 * C::CONSUMERS), mbar_init(&s.empty_v[i], 4 * C::CONSUMERS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    /* Barrier: the mbarriers are initialised (and the key ranges in) before any thread (or TMA)
     * uses them. */
    __syncthreads();
    if constexpr (VAR)                                      /* packed: cu_seqlens' rules, the tile's rows */
        if (seq.packed && !var_packed_tile<C::THREADS>(a.var, p, Nq, item_pos<C, SPLIT>(a, cta_tile(a, 0)).tp.m0))
            return;                                         /* the whole CTA, before any role */

    /* This CTA's tiles (cta_tile: one unless persistent); the producer and the consumers walk the
     * same sequence. The K/V ring and the Q buffers run on across tiles: kc counts the blocks this
     * CTA has passed through the ring, it the tiles. setmaxnreg comes first and unconditionally,
     * so that ptxas allocates each role's loop under its own register budget. */
    int kc = 0, it = 0;
    if (wg == 0) {
        /* Producer: one thread issues every load; the others leave. */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(C::PRODUCER_REGS));
        if (threadIdx.x != 0)
            return;
        for (int64_t item = cta_tile(a, 0); item < a.n_items; item = cta_tile(a, ++it)) {
            sm90_item w = item_pos<C, SPLIT>(a, item);
            fa_var_keys kr;
            if constexpr (VAR) {
                kr = var_keys_get(a.var, keys, a.key_rows, w.tp.b, Nk);
                var_blocks<C::BN>(a.var, seq, kr, w.tp.m0, min(w.tp.m0 + BM, Nq) - 1, w.kb0, w.nb);
            }
            const int h = w.tp.h, hk = w.tp.hk, n_blocks = w.nb, kb0 = w.kb0;
            /* Packed: the sequence's rows, in tensor maps of one batch entry over all rows. */
            const int b = VAR && seq.packed ? 0 : w.tp.b;
            const int m0 = w.tp.m0 + (VAR ? (int)seq.q0 : 0), k0 = VAR ? (int)seq.k0 : 0;
            const int qb = it % C::QBUFS;
            const uint32_t q_parity = (it / C::QBUFS) & 1;
            SM90_TRACE(it, 0);
            /* Q buffer qb is free once every consumer has stored the O it staged there. */
            mbar_wait(&s.empty_q[qb], q_parity ^ 1);
            mbar_expect_tx(&s.full_q[qb], BM * D * 2);
#pragma unroll
            for (int pn = 0; pn < PANELS; pn++)
                tma_load(s.q[qb][pn], &a.tm_q, 64 * pn, m0, h, b, &s.full_q[qb]);
            SM90_TRACE(it, 1);
            for (int kb = 0; kb < n_blocks; kb++) {
                const int st = (kc + kb) % STAGES;
                const uint32_t parity = (((kc + kb) / STAGES) & 1) ^ 1;
#if defined(FA_SM90_TRACE) && FA_SM90_TRACE_NO_KV
                /* A timing probe, wrong results: past the ring's first fill the stages are
                 * declared landed without a load, so the main loop runs without K / V traffic. */
                if (kc + kb >= STAGES) {
                    mbar_wait(&s.empty_k[st], parity);
                    mbar_arrive(&s.full_k[st]);
                    mbar_wait(&s.empty_v[st], parity);
                    mbar_arrive(&s.full_v[st]);
                    continue;
                }
#endif
                mbar_wait(&s.empty_k[st], parity);
                mbar_expect_tx(&s.full_k[st], BN * D * 2 + (MSMEM ? BM * BN * 2 : 0));
#pragma unroll
                for (int pn = 0; pn < PANELS; pn++)
                    tma_load(s.k[st][pn], &a.tm_k, 64 * pn, k0 + (kb0 + kb) * BN, hk, b, &s.full_k[st]);
                if constexpr (MSMEM) {                      /* attn_mask[b, h, m0.., block]: never packed */
#pragma unroll
                    for (int mp = 0; mp < BN / 64; mp++)
                        tma_load(s.mask.m[st][mp], &a.tm_mask, (kb0 + kb) * BN + 64 * mp, w.tp.m0, a.mask_h ? h : 0,
                                 a.mask_b ? w.tp.b : 0, &s.full_k[st]);
                }
                mbar_wait(&s.empty_v[st], parity);
                mbar_expect_tx(&s.full_v[st], BN * D * 2);
#pragma unroll
                for (int pn = 0; pn < PANELS; pn++)
                    tma_load(s.v[st][pn], &a.tm_v, 64 * pn, k0 + (kb0 + kb) * BN, hk, b, &s.full_v[st]);
            }
            SM90_TRACE(it, 2);
            kc += n_blocks;
        }
        return;
    }

    /* Consumers: 64 query rows per warpgroup, O and the softmax state in registers. */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(C::CONSUMER_REGS));
    bool stored = false;                                    /* STORE_DEFER: the last item's O store */
    for (int64_t item = cta_tile(a, 0); item < a.n_items; item = cta_tile(a, ++it)) {
        sm90_item w = item_pos<C, SPLIT>(a, item);
        fa_var_keys kr;
        if constexpr (VAR) {
            kr = var_keys_get(a.var, keys, a.key_rows, w.tp.b, Nk);
            var_blocks<C::BN>(a.var, seq, kr, w.tp.m0, min(w.tp.m0 + BM, Nq) - 1, w.kb0, w.nb);
        }
        const int b = w.tp.b, h = w.tp.h, m0 = w.tp.m0, n_blocks = w.nb, kb0 = w.kb0;
        const int64_t bh = w.tp.bh;
        SM90_TRACE(it, 12);
        SM90_TRACE_VAL(it, 13, m0);
        const int qb = it % C::QBUFS;
        const uint32_t q_parity = (it / C::QBUFS) & 1;
        const int cw = wg - 1;                              /* consumer cw: rows 64cw.. of the tile */
        const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
        const int g = lane / 4, t = lane % 4;
        const float c = a.scale_log2;
        const int row_first = m0 + 64 * cw;                 /* this warpgroup's first and this */
        const int row0 = row_first + 16 * warp + g;         /* thread's rows: row0, row0 + 8 */
        const uint32_t s_q = smem_u32(s.q[qb]) + 64 * cw * 128; /* this warpgroup's rows of panel 0 */
        /* MSMEM: this lane's ldmatrix row of mask stage 0 (var_mask_staged); stages M_STAGE apart. */
        constexpr uint32_t M_STAGE = MSMEM ? BN / 64 * BM * 128 : 0;
        uint32_t m_row = 0;
        if constexpr (MSMEM)
            m_row = smem_u32(s.mask.m[0]) + (64 * cw + 16 * warp + 8 * ((lane / 8) % 2) + lane % 8) * 128;
        /* Ping-pong: consumer cw issues after consumer cw − 1 (cyclically); every consumer takes
         * n_blocks + 1 turns per tile (all blocks, even fully masked ones). The last consumer gives
         * the first its first turn of the CTA's first tile, and passes its last turn of each tile on
         * to the first unless the tile is the CTA's last, so every barrier balances. */
        const bool pp = C::PINGPONG;
        const int next_cw = (cw + 1) % C::CONSUMERS;
        const bool last_tile = cta_tile(a, it + 1) >= a.n_items;
        if (pp && cw == C::CONSUMERS - 1 && it == 0)
            turn_pass(0);

        /* Rows all past Nq (in a head's last query tile): this warpgroup computes nothing. It
         * releases each stage once it has landed and takes its turns as the others do, so that
         * every barrier balances (ping-pong only: the turns keep it in step with the others, so
         * that its arrivals on empty_q cannot run a Q buffer's phase ahead). */
        if (pp && row_first >= Nq) {
            for (int kb = 0; kb <= n_blocks; kb++) {
                if (kb < n_blocks)
                    release_landed<C>(s, kc + kb, lane);
                turn_wait(cw);
                if (kb < n_blocks || cw != C::CONSUMERS - 1 || !last_tile)
                    turn_pass(next_cw);
                if (kb == 0 && STORE_DEFER && stored && threadIdx.x % 128 == 0) {
                    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
                    mbar_arrive(&s.empty_q[(it + 1) % C::QBUFS]);
                }
            }
            kc += n_blocks;
            stored = false;
            if (threadIdx.x % 128 == 0)
                mbar_arrive(&s.empty_q[qb]);
            continue;
        }

        float r_o[D / 2];                                   /* O: 64 × D, wgmma accumulator layout */
#pragma unroll
        for (int i = 0; i < D / 2; i++)
            r_o[i] = 0.f;
        float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.f, 0.f}, alpha[2];
        float r_s[BN / 2];                                  /* S, then P in fp32: 64 × BN */
        uint32_t r_p[BN / 16][4];                           /* P as wgmma A fragments, keys 16kk.. */

        /* Causal, without ping-pong: blocks starting past this warpgroup's last row are all masked
         * for it (blocks at the end only); it releases them untouched. Block 0 shows key 0 to every
         * row, so every m_i is finite after it. */
        const int n_act = !VAR && p.causal && !C::PINGPONG ? min(n_blocks, (row_first + 63) / BN + 1) : n_blocks;
        sm90_softmax_ctx ctx = {Nk, p.causal, row_first, row0, t, VAR ? 1.f : c};
        fa_var_rows y;                                      /* VAR: scores masked, in log2 units unless raw */
        if constexpr (VAR) {
            y = var_rows<VAR == FA_VAR_ALL>(a.var, seq, kr, b, h, row_first, row_first + 63, row0, a.var.scale, true);
            ctx.c = y.raw ? y.c : 1.f;
            if constexpr (VAR == FA_VAR_ALL && !MSMEM && D >= 128) /* attn_mask read per score: blocks 0, 1 */
                for (int kb = 0; kb < 2 && kb < n_act; kb++)
                    var_mask_prefetch<BN>((kb0 + kb) * BN, t, y);
        }

        SM90_TRACE_NS(it, 6);
        SM90_TRACE(it, 0);
        mbar_wait(&s.full_q[qb], q_parity);
        SM90_TRACE(it, 1);
        /* Block 0: S_0 = Q K_0ᵀ, P_0. */
        {
            const int st = kc % STAGES;
            mbar_wait(&s.full_k[st], (kc / STAGES) & 1);
            if (pp)
                turn_wait(cw);
            issue_qk<T, C>(r_s, s_q, smem_u32(s.k[st]));
            if (pp)
                turn_pass(next_cw);
            /* The previous item's O has been read out of its Q buffer: the producer may refill it. */
            if (STORE_DEFER && stored && threadIdx.x % 128 == 0) {
                asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
                mbar_arrive(&s.empty_q[(it + 1) % C::QBUFS]);
            }
            stored = false;
            wgmma_wait<0>();
            reg_fence(r_s);
            if (!MSMEM)
                release(&s.empty_k[st], lane);
        }
        if constexpr (VAR) {
            const int st = kc % STAGES;
            var_scores<T, BN, VAR == FA_VAR_ALL, MSMEM ? BM * 128 : 0>(r_s, kb0 * BN, t, y, m_row + st * M_STAGE);
            if (MSMEM)
                release(&s.empty_k[st], lane);
        }
        sm90_softmax<C, VAR != 0>(r_s, m_i, l_i, alpha, kb0 * BN, ctx);
        pack_frags<T, BN>(r_p, r_s);
        SM90_TRACE(it, 2);
        /* Block kb: S_kb = Q K_kbᵀ and O += P_(kb−1) V_(kb−1) are issued together; the softmax of
         * S_kb waits only for the first, so it overlaps the second, and O is rescaled once the second
         * has completed. The last block's P V follows the loop. */
        SM90_TRACE_VAR(tr_kv);
        SM90_TRACE_VAR(tr_turn);
        SM90_TRACE_VAR(tr_qk);
        SM90_TRACE_VAR(tr_pv);
        SM90_TRACE_VAR(tr_issue);
        SM90_TRACE_VAR(tr_sm);
        for (int kb = 1; kb < n_act; kb++) {
            const int st = (kc + kb) % STAGES, pst = (kc + kb - 1) % STAGES;
            SM90_TIMED(tr_kv, mbar_wait(&s.full_k[st], ((kc + kb) / STAGES) & 1);
                              mbar_wait(&s.full_v[pst], ((kc + kb - 1) / STAGES) & 1));
            if (pp)
                SM90_TIMED(tr_turn, turn_wait(cw));
            SM90_TIMED(tr_issue, issue_qk<T, C>(r_s, s_q, smem_u32(s.k[st]));
                                 issue_pv<T, C>(r_o, r_p, smem_u32(s.v[pst]));
                                 if (pp) turn_pass(next_cw));
            if constexpr (VAR == FA_VAR_ALL && !MSMEM && D >= 128) /* the next block's mask into L2 */
                if (kb + 1 < n_act)
                    var_mask_prefetch<BN>((kb0 + kb + 1) * BN, t, y);
            SM90_TIMED(tr_qk, wgmma_wait<1>());             /* S_kb is ready, P V may still run */
            SM90_TIMED(tr_sm, reg_fence(r_s);
                              if (!MSMEM) release(&s.empty_k[st], lane);
                              if constexpr (VAR) var_scores<T, BN, VAR == FA_VAR_ALL, MSMEM ? BM * 128 : 0>(
                                  r_s, (kb0 + kb) * BN, t, y, m_row + st * M_STAGE);
                              if (MSMEM) release(&s.empty_k[st], lane);
                              sm90_softmax<C, VAR != 0>(r_s, m_i, l_i, alpha, (kb0 + kb) * BN, ctx);
                              softmax_done<C>(l_i));
            SM90_TIMED(tr_pv, wgmma_wait<0>());             /* O += P_(kb−1) V_(kb−1) is done */
            reg_fence(r_o);
            reg_fence_u(r_p);
            release(&s.empty_v[pst], lane);
            rescale<C>(r_o, alpha);
            pack_frags<T, BN>(r_p, r_s);
        }
        SM90_TRACE(it, 3);
        SM90_TRACE_PUT4(it, tr_kv, tr_turn, tr_qk, tr_pv);
        SM90_TRACE_PUT2(it, tr_issue, tr_sm);
        {
            const int st = (kc + n_act - 1) % STAGES;
            mbar_wait(&s.full_v[st], ((kc + n_act - 1) / STAGES) & 1);
            if (pp)
                turn_wait(cw);
            issue_pv<T, C>(r_o, r_p, smem_u32(s.v[st]));
            if (pp && (cw != C::CONSUMERS - 1 || !last_tile))
                turn_pass(next_cw);
            wgmma_wait<0>();
            reg_fence(r_o);
            reg_fence_u(r_p);
            release(&s.empty_v[st], lane);
        }
        /* Blocks all masked for this warpgroup: released once they have landed. */
        for (int kb = n_act; kb < n_blocks; kb++)
            release_landed<C>(s, kc + kb, lane);
        kc += n_blocks;
        SM90_TRACE(it, 4);

        /* l = rowsum over the quad (> 0: each row's max term is exp2(~0)); O /= l; lse. VAR: a
         * sink joins the denominator, and a row that saw no key (l = 0) gets O = 0 (fa_row_end). */
        float inv_l[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float l = l_i[r];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            float lse2 = 0.f;
            if constexpr (VAR) {
                const float *sinks = a.var.v.sinks;
                fa_row_end(m_i[r] * ctx.c, l, sinks != NULL, sinks != NULL ? sinks[h] * FA_LOG2E : 0.f, &inv_l[r],
                           &lse2);
            } else {
                inv_l[r] = 1.f / l;
            }
            const int row = row0 + 8 * r;
            if (SPLIT && w.j >= 0 && t == 0)                /* a part: lse_part (tail item, BM) */
                a.lse_part[w.j * BM + row - m0] = m_i[r] * c + log2f(l);
            else if (p.lse && t == 0 && row < Nq)           /* lse: (B, Hq, Nq); packed (Hq, total_q) */
                p.lse[VAR && seq.packed ? h * seq.total_q + seq.q0 + row : bh * p.Nq + row] =
                    VAR ? lse2 * FA_LN2 : fa_lse(m_i[r] * c, l);
        }

        /* A part of a split tile: O / l in fp32 to o_part, row r of the tile at (j·BM + r)·d (d is
         * even: columns 2t, 2t + 1 go as one float2), for fa_sm90_merge_kernel. Then, once every
         * warp of the warpgroup is past its last wgmma (warpgroup barrier), Q's buffer is free. */
        if (SPLIT && w.j >= 0) {
            const int d = (int)p.d;
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float *o_row = a.o_part + (w.j * BM + row0 + 8 * r - m0) * d;
#pragma unroll
                for (int j = 0; j < D / 8; j++)
                    if (8 * j + 2 * t < d)
                        *reinterpret_cast<float2 *>(o_row + 8 * j + 2 * t) =
                            make_float2(r_o[4 * j + 2 * r] * inv_l[r], r_o[4 * j + 2 * r + 1] * inv_l[r]);
            }
            warpgroup_bar(1 + cw);
            if (threadIdx.x % 128 == 0)
                mbar_arrive(&s.empty_q[qb]);
            SM90_TRACE(it, 5);
            continue;
        }

        /* Stage O in this warpgroup's Q rows (its last S = Q Kᵀ has completed): column 8j + 2t of
         * row rr is chunk j % 8 of panel j / 8, swizzled, bytes 4t..4t+3. */
#pragma unroll
        for (int j = 0; j < D / 8; j++)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int rr = 16 * warp + g + 8 * r;
                const uint32_t addr = s_q + (j / 8) * (BM * 128) + rr * 128 + (((j % 8) ^ (rr % 8)) << 4) + 4 * t;
                const uint32_t x = pack2<T>(r_o[4 * j + 2 * r] * inv_l[r], r_o[4 * j + 2 * r + 1] * inv_l[r]);
                asm volatile("st.shared.b32 [%0], %1;\n" :: "r"(addr), "r"(x) : "memory");
            }
        /* The TMA engine reads what the generic proxy wrote: fence, then a warpgroup barrier so
         * that one thread stores all 64 rows. */
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        warpgroup_bar(1 + cw);
        if (VAR && seq.packed) {                            /* packed: rows past Nq are another sequence's */
            var_store_rows<D, BM>(p, s_q, seq, h, row_first);
            warpgroup_bar(1 + cw);                          /* every thread has read its rows of Q's buffer */
            if (threadIdx.x % 128 == 0)
                mbar_arrive(&s.empty_q[qb]);
            SM90_TRACE(it, 5);
            continue;
        }
        if (threadIdx.x % 128 == 0) {
#pragma unroll
            for (int pn = 0; pn < PANELS; pn++)
                tma_store(&a.tm_o, &s.q[qb][pn][64 * cw][0], 64 * pn, row_first, h, b);
            asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
            /* Shared memory must outlive the store's reads of it; then the producer may refill it
             * (STORE_DEFER: after the next item's first Q Kᵀ is issued, or below). */
            if (!STORE_DEFER || last_tile) {
                asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
                mbar_arrive(&s.empty_q[qb]);
            }
        }
        stored = true;
        SM90_TRACE(it, 5);
    }
#endif /* FA_SM90_DEVICE */
}

/* The split tiles' parts merged, one warp per row of a tail tile, MERGE_ROWS rows per CTA (grid
 * n_split / parts · BM / MERGE_ROWS): O = Σ_q w_q O_q / Σ_q w_q, w_q = exp2(lse_q − M),
 * M = max_q lse_q; lse = M + log2 Σ_q w_q. Every part reads at least one key (non-causal), so each
 * lse_q is finite for finite inputs. */
#define MERGE_ROWS 4
template <typename T, class C>
__global__ void __launch_bounds__(32 * MERGE_ROWS) fa_sm90_merge_kernel(const __grid_constant__ sm90_args a)
{
#ifdef FA_SM90_DEVICE
    constexpr int BM = C::BM, MAX_PARTS = 4;
    static_assert(BM % MERGE_ROWS == 0, "a CTA's rows lie in one tile");
    const fa_params &p = a.p;
    const int lane = threadIdx.x % 32;
    const int64_t item_row = (int64_t)blockIdx.x * MERGE_ROWS + threadIdx.x / 32;
    const int64_t tail = item_row / BM;
    const int r = (int)(item_row % BM);
    const sm90_tile_pos tp = tile_pos<C>(a, a.n_whole + tail);
    const int row = tp.m0 + r;
    if (row >= p.Nq)
        return;
    const int parts = a.parts, d = (int)p.d;
    const int64_t j0 = tail * parts;
    float lse[MAX_PARTS], M = -INFINITY;
#pragma unroll
    for (int q = 0; q < MAX_PARTS; q++) {
        lse[q] = q < parts ? a.lse_part[(j0 + q) * BM + r] : -INFINITY;
        M = fmaxf(M, lse[q]);
    }
    float wt[MAX_PARTS], l = 0.f;
#pragma unroll
    for (int q = 0; q < MAX_PARTS; q++) {
        wt[q] = q < parts ? exp2f(lse[q] - M) : 0.f;
        l += wt[q];
    }
    T *o = (T *)p.o + tp.b * p.o_batch_stride + tp.h * p.o_head_stride + row * p.o_row_stride;
    for (int col = lane; col < d; col += 32) {
        float x = 0.f;
#pragma unroll
        for (int q = 0; q < MAX_PARTS; q++)
            if (q < parts)
                x += wt[q] * a.o_part[((j0 + q) * BM + r) * d + col];
        from_float(o + col, x / l);
    }
    if (p.lse && lane == 0)
        p.lse[tp.bh * p.Nq + row] = fa_lse(M, l);
#endif /* FA_SM90_DEVICE */
}

/* ---- Host launch --------------------------------------------------------------------------- */

/* Whether tile C's persistent grid may split its last round along the keys: only the d = 128
 * three-consumer tile, where it gains (plan.c, fa_plan_sm90_walk); the split kernel and the merge kernel
 * exist for that tile only. */
template <class C>
static constexpr bool sm90_splits()
{
    return C::D == 128 && C::CONSUMERS == 3;
}

template <class C>
static fa_sm90_shape sm90_shape()
{
    return {C::D, C::BN, C::BM, C::CONSUMERS, C::PINGPONG, sm90_splits<C>()};
}

/* Launches tile C for element type T, or returns FA_ERR_UNSUPPORTED (then the sm_80 kernel runs).
 * scratch (may be NULL): room for a split last round (plan.c, fa_plan_sm90_walk); with too little
 * the last round's tiles run whole. need != NULL: only the scratch the call would use is returned in
 * *need, nothing runs. VAR: the kernel with the variants of v, which never splits a tile. */
template <typename T, class C, int VAR = 0>
static int sm90_launch(const fa_params *p, const fa_overrides *o, void *scratch, size_t scratch_bytes,
                       size_t *need, cudaStream_t stream, const fa_variants *v = NULL)
{
    typedef typename sm90_kargs<VAR>::type args_t;
    void (*kernel)(const args_t) = fa_sm90_forward_kernel<T, C, false, VAR>;
    const size_t smem = sizeof(sm90_smem<C>) + 1024;  /* + alignment of the base to 1024 */

    /* Once per device (bit dev of s_ok / s_checked; devices past 31 every call): compute
     * capability 9.0, an sm_90a build of this kernel, and the dynamic shared memory raised. */
    static unsigned s_checked, s_ok;
    int dev;
    fa_device info;
    int st = fa_device_current(&dev, &info);
    if (st != FA_OK)
        return st;
    if (info.major != 9 || info.minor != 0)         /* also under a test's fa_overrides.device_cc */
        return FA_ERR_UNSUPPORTED;
    if (dev >= 32 || !((__atomic_load_n(&s_checked, __ATOMIC_ACQUIRE) >> dev) & 1u)) {
        int ok = info.major == 9 && info.minor == 0 && smem <= (size_t)info.smem_optin;
        if (ok) {
            cudaFuncAttributes attr;
            FA_CUDA_TRY(cudaFuncGetAttributes(&attr, kernel));
            ok = attr.binaryVersion == 90;
        }
        if (ok) {
            /* VAR: up to all of it, for key_mask's ranges past the struct (a.key_rows). */
            FA_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             VAR ? info.smem_optin : (int)smem));
            if constexpr (sm90_splits<C>() && !VAR)
                FA_CUDA_TRY(cudaFuncSetAttribute(fa_sm90_forward_kernel<T, C, true, 0>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        }
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

    args_t a;
    memset(&a, 0, sizeof a);
    a.p = *p;
    a.n_q_tiles = (p->Nq + C::BM - 1) / C::BM;
    a.n_tiles = a.n_q_tiles * p->B * p->Hq;
    if (a.n_tiles >= (1 << 29))                     /* items (up to 4 per tile) in 31 bits */
        return FA_ERR_UNSUPPORTED;
    a.div_q_tiles = sm90_divisor_make((uint32_t)a.n_q_tiles);
    a.div_full_q = a.div_q_tiles;
    a.div_bh = sm90_divisor_make((uint32_t)(p->B * p->Hq));
    a.div_hq = sm90_divisor_make((uint32_t)p->Hq);
    a.div_q_per_kv = sm90_divisor_make((uint32_t)(p->Hq / p->Hkv));
    a.n_items = a.n_whole = a.n_full = a.n_tiles;
    a.parts = 1;
    const bool packed = VAR && v->cu_seqlens_q != NULL;     /* one tile per CTA: var_packed_tile */
    const int persistent = !packed && fa_plan_sm90_persistent(p, o);
    const int64_t grid = persistent ? (a.n_tiles < info.sms ? a.n_tiles : info.sms) : a.n_tiles;
    if (persistent) {
        size_t bytes = 0;
        fa_sm90_walk w = fa_plan_sm90_walk(p, o, sm90_shape<C>(), a.n_q_tiles, a.n_tiles, grid, !VAR, &bytes);
        if (need != NULL) {
            *need = bytes;
            return FA_OK;
        }
        if (w.parts > 1 && (scratch == NULL || scratch_bytes < bytes))
            w = fa_plan_sm90_walk(p, o, sm90_shape<C>(), a.n_q_tiles, a.n_tiles, grid, 0, &bytes);
        a.n_full = w.n_full;
        if (a.n_full < a.n_tiles)                   /* each head's last query tile moved last */
            a.div_full_q = sm90_divisor_make((uint32_t)(a.n_q_tiles > 1 ? a.n_q_tiles - 1 : 1));
        if (w.parts > 1) {
            a.parts = w.parts;
            a.n_whole = w.n_whole;
            a.n_split = w.split * w.parts;
            a.n_items = a.n_tiles - w.split + a.n_split;
            a.o_part = (float *)scratch;
            a.lse_part = a.o_part + a.n_split * C::BM * p->d;
        }
    } else if (need != NULL) {
        *need = 0;
        return FA_OK;
    }
    const int bf16 = p->dtype == FA_BFLOAT16;
    /* Packed: maps over all rows (total_q, total_k) as one batch entry. */
    const int64_t mb = packed ? 1 : p->B, nq = packed ? v->total_q : p->Nq, nk = packed ? v->total_k : p->Nk;
    if (nq > INT32_MAX || nk > INT32_MAX
        || make_map(&a.tm_q, bf16, p->q, mb, p->Hq, nq, p->d, p->q_batch_stride, p->q_head_stride,
                    p->q_row_stride, C::BM)
        || make_map(&a.tm_k, bf16, p->k, mb, p->Hkv, nk, p->d, p->k_batch_stride, p->k_head_stride,
                    p->k_row_stride, C::BN)
        || make_map(&a.tm_v, bf16, p->v, mb, p->Hkv, nk, p->d, p->v_batch_stride, p->v_head_stride,
                    p->v_row_stride, C::BN)
        || make_map(&a.tm_o, bf16, p->o, mb, p->Hq, nq, p->d, p->o_batch_stride, p->o_head_stride,
                    p->o_row_stride, 64))
        return FA_ERR_UNSUPPORTED;
    a.scale_log2 = fmaxf(p->scale * FA_LOG2E, FLT_MIN);
    size_t launch_smem = smem;
    if constexpr (VAR) {
        a.var = var_resolve(p, v);                  /* row + δ ± side in 32 bits: Nq + Nk < 2³¹ */
        /* key_mask: each batch entry's key range in 8 bytes past the struct, where they fit (else
         * the kernel tests every key of every block). */
        a.key_rows = v->key_mask != NULL && !packed && smem + 8 * (size_t)p->B <= (size_t)info.smem_optin;
        if (a.key_rows)
            launch_smem += 8 * (size_t)p->B;
        if constexpr (C::MASK_STAGES > 0) {        /* attn_mask (b, h, row, key), box 64 keys × BM rows */
            a.mask_h = v->mask_head_stride != 0;
            a.mask_b = v->mask_batch_stride != 0;
            if (packed || make_map(&a.tm_mask, bf16, v->mask, a.mask_b ? p->B : 1, a.mask_h ? p->Hq : 1, p->Nq,
                                   p->Nk, v->mask_batch_stride, v->mask_head_stride, v->mask_row_stride, C::BM))
                return FA_ERR_UNSUPPORTED;
        }
    }

    /* Tiles (b·Hq + h) × query tile. Persistent: one CTA per SM (at most one per tile), each
     * walking every grid-th work item (whole tiles, then the parts of a split last round, merged
     * by fa_sm90_merge_kernel). Else one CTA per tile. */
    a.tile_stride = grid;
    a.snake = persistent && p->causal;
    if constexpr (sm90_splits<C>() && !VAR) {
        if (a.parts > 1) {
            fa_sm90_forward_kernel<T, C, true, 0><<<(unsigned)grid, C::THREADS, smem, stream>>>(a);
            FA_CUDA_TRY(cudaGetLastError());
            const int64_t merge_blocks = a.n_split / a.parts * C::BM / MERGE_ROWS;
            fa_sm90_merge_kernel<T, C><<<(unsigned)merge_blocks, 32 * MERGE_ROWS, 0, stream>>>(a);
            FA_CUDA_TRY(cudaGetLastError());
            return FA_OK;
        }
    }
    kernel<<<(unsigned)grid, C::THREADS, launch_smem, stream>>>(a);
    FA_CUDA_TRY(cudaGetLastError());
    return FA_OK;
}

/* The tile for a call, launched (need == NULL) or asked for its scratch (sm90_launch). */
static int sm90_dispatch(const fa_params *p, const fa_overrides *o, void *scratch, size_t scratch_bytes,
                         size_t *need, cudaStream_t stream)
{
    /* fp32 has its own kernel; a negative scale (Q would need negating) and Nk == 0 go to the
     * other families; TMA coordinates are 32-bit. */
    if (p->dtype == FA_FLOAT32 || p->scale < 0.f || p->Nk < 1 || p->Nq > INT32_MAX - 256
        || p->Nk > INT32_MAX - 256 || p->B > INT32_MAX || p->Hq > INT32_MAX)
        return FA_ERR_UNSUPPORTED;
    const int bf16 = p->dtype == FA_BFLOAT16;
    if (p->d <= 64 && p->causal && p->Nq <= FA_SM90_D64_SHORT_CAUSAL)
        return bf16 ? sm90_launch<__nv_bfloat16, sm90_tile_d64_short>(p, o, scratch, scratch_bytes, need, stream)
                    : sm90_launch<__half, sm90_tile_d64_short>(p, o, scratch, scratch_bytes, need, stream);
    if (p->d <= 64)
        return bf16 ? sm90_launch<__nv_bfloat16, sm90_tile_d64>(p, o, scratch, scratch_bytes, need, stream)
                    : sm90_launch<__half, sm90_tile_d64>(p, o, scratch, scratch_bytes, need, stream);
    if (p->d <= 128 && !p->causal && p->Nk >= FA_SM90_LONG_NK)
        return bf16 ? sm90_launch<__nv_bfloat16, sm90_tile_d128_long>(p, o, scratch, scratch_bytes, need, stream)
                    : sm90_launch<__half, sm90_tile_d128_long>(p, o, scratch, scratch_bytes, need, stream);
    if (p->d <= 128)
        return bf16 ? sm90_launch<__nv_bfloat16, sm90_tile_d128>(p, o, scratch, scratch_bytes, need, stream)
                    : sm90_launch<__half, sm90_tile_d128>(p, o, scratch, scratch_bytes, need, stream);
    return bf16 ? sm90_launch<__nv_bfloat16, sm90_tile_d256>(p, o, scratch, scratch_bytes, need, stream)
                : sm90_launch<__half, sm90_tile_d256>(p, o, scratch, scratch_bytes, need, stream);
}

/* A call with variants (fa.h). The kernel with every variant (FA_VAR_ALL: softcap, ALiBi or an
 * attn_mask) runs 2 consumers at every width: 3 consumers' 160 registers leave no room for the
 * per-score state. The visibility variants alone (FA_VAR_MASKS) take the plain kernel's tiles:
 * 3 consumers at d = 64 (but short causal calls), and at d <= 128 for non-causal calls from
 * FA_SM90_LONG_NK keys. Packed
 * sequences run one tile per CTA over the longest sequence's query tiles (a tile past its
 * sequence's end leaves at once). */
static int sm90_dispatch_variants(const fa_params *p, const fa_variants *v, const fa_overrides *o, cudaStream_t stream)
{
    if (p->dtype == FA_FLOAT32 || p->scale < 0.f || p->Nk < 1 || p->Nq + p->Nk > INT32_MAX - 256
        || p->B > INT32_MAX || p->Hq > INT32_MAX)
        return FA_ERR_UNSUPPORTED;
    const int bf16 = p->dtype == FA_BFLOAT16;
    const int all = v->softcap > 0.f || v->alibi_slopes != NULL || v->mask != NULL;
    /* A float mask of q's dtype with adjacent keys and rows: through shared memory where TMA can
     * read it (else, or if the map cannot be built, each thread reads its scores' entries). */
    const int staged = v->mask != NULL && v->mask_kind == FA_MASK_ADD && v->mask_col_stride == 1
                    && v->mask_row_stride > 0 && v->cu_seqlens_q == NULL;
#define FA_SM90_VAR_LAUNCH(tile, kind)                                                              \
    (bf16 ? sm90_launch<__nv_bfloat16, tile, kind>(p, o, NULL, 0, NULL, stream, v)                 \
          : sm90_launch<__half, tile, kind>(p, o, NULL, 0, NULL, stream, v))
    if (all) {
        int st = FA_ERR_UNSUPPORTED;
        if (p->d <= 64) {
            if (staged)
                st = FA_SM90_VAR_LAUNCH(sm90_tile_mask<sm90_tile_d64_short>, FA_VAR_ALL);
            return st != FA_ERR_UNSUPPORTED ? st : FA_SM90_VAR_LAUNCH(sm90_tile_d64_short, FA_VAR_ALL);
        }
        if (p->d <= 128) {
            if (staged)
                st = FA_SM90_VAR_LAUNCH(sm90_tile_mask<sm90_tile_d128>, FA_VAR_ALL);
            return st != FA_ERR_UNSUPPORTED ? st : FA_SM90_VAR_LAUNCH(sm90_tile_d128, FA_VAR_ALL);
        }
        return FA_SM90_VAR_LAUNCH(sm90_tile_d256, FA_VAR_ALL);
    }
    if (p->d <= 64 && p->causal && p->Nq <= FA_SM90_D64_SHORT_CAUSAL)
        return FA_SM90_VAR_LAUNCH(sm90_tile_d64_short, FA_VAR_MASKS);
    if (p->d <= 64)
        return FA_SM90_VAR_LAUNCH(sm90_tile_d64, FA_VAR_MASKS);
    if (p->d <= 128 && !p->causal && p->Nk >= FA_SM90_LONG_NK)
        return FA_SM90_VAR_LAUNCH(sm90_tile_d128_long, FA_VAR_MASKS);
    if (p->d <= 128)
        return FA_SM90_VAR_LAUNCH(sm90_tile_d128, FA_VAR_MASKS);
    return FA_SM90_VAR_LAUNCH(sm90_tile_d256, FA_VAR_MASKS);
#undef FA_SM90_VAR_LAUNCH
}

#ifdef FA_SM90_TRACE
extern "C" int fa_sm90_trace_set(void *buf)
{
    long long *p = (long long *)buf;
    return cudaMemcpyToSymbol(fa_sm90_trace_buf, &p, sizeof p) != cudaSuccess;
}
#endif

extern "C" int fa_sm90_forward(const fa_params *p, const fa_overrides *o, void *scratch, size_t scratch_bytes,
                               cudaStream_t stream)
{
    return sm90_dispatch(p, o, scratch, scratch_bytes, NULL, stream);
}

extern "C" int fa_sm90_forward_variants(const fa_params *p, const fa_variants *v, const fa_overrides *o,
                                        cudaStream_t stream)
{
    return sm90_dispatch_variants(p, v, o, stream);
}

extern "C" int fa_sm90_scratch_bytes(const fa_params *p, const fa_overrides *o, size_t *bytes)
{
    *bytes = 0;
    const int status = sm90_dispatch(p, o, NULL, 0, bytes, NULL);
    if (status != FA_OK)
        *bytes = 0;
    return status;
}
