/*
 * sm80.cu — FlashAttention-2 forward for fp16 and bf16 on tensor cores (sm_80 and later).
 *
 * One CTA owns BM query rows of one (batch, head); each of its warps owns 16·WM consecutive rows
 * (WM m16 tiles, so every K and V fragment read from shared memory feeds WM MMAs). The CTA walks
 * the key/value blocks of BN rows through cp.async rings of STAGES buffers and keeps, per row,
 * the running max m_i (raw score units), the running sum l_i and the fp32 accumulator O in
 * registers; c = scale · log2(e):
 *
 *     S = Q Kᵀ                                  mma.m16n8k16, fp32 accumulate
 *     m_new = max(m_i, rowmax(S))
 *     P = exp2(S·c − m_new·c)                   one FFMA and one ex2 per element
 *     l_i = l_i · exp2((m_i − m_new)·c) + rowsum(P)
 *     O = O · exp2((m_i − m_new)·c) + P V       P stays in registers as the A operand
 *     O /= l_i,  lse = (m_i·c + log2 l_i) · ln 2  at the end
 *
 * P's exponent is fma(S, c, −fl(m_new·c)); where a row of the warp has |m_new·c| past 2^20
 * (softmax.cuh, FA_EXACT_EXP_FROM) it is fma(S, c, −fl(m_new·c)) − res, res = m_new·c − fl(m_new·c)
 * (one fma a row), so that at huge scores the max key's P stays exactly 1.
 *
 * K and V of a block are separate cp.async groups: block j's S = Q Kᵀ needs only K_j, and its
 * V_j keeps landing meanwhile; the loads of the next STAGES − 1 blocks overlap both.
 *
 * Head dims are padded to a compiled tile width (64, 128 or 256): the extra columns of Q, K and V
 * are zero-filled in shared memory and never stored, so they cost MMA work but not correctness.
 * Shared tiles are row-major with 16-byte chunks XOR-swizzled by (row mod 8), which makes every
 * ldmatrix phase and every cp.async write bank-conflict free.
 *
 * Reached through fa_sm80_forward() (called by the CUDA dispatcher after fa_check_params). Builds
 * with plain nvcc; includes CUDA headers and fa.h only:
 *     nvcc -std=c++17 -O3 -gencode arch=compute_80,code=sm_80 -c csrc/cuda/sm80.cu -Icsrc
 * tools/sm80/tune.cu includes this file to build, check and time other tile shapes.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <float.h>
#include <stdint.h>

#include "families.h"
#include "dtype.cuh"
#include "ptx.cuh"
#include "softmax.cuh"
#include "variants.cuh"

/* A tile shape: D the compiled head-dim width; BM query rows per CTA over WARPS warps (WM = BM /
 * 16 / WARPS m16 tiles per warp); BN keys per block; STAGES buffers per K and V ring; MIN_CTAS
 * CTAs per SM that the registers must allow (__launch_bounds__); Q_IN_REGS: each warp keeps its
 * Q fragments in registers for the whole key loop instead of re-reading them from shared memory;
 * WHOLE: whole tiles take load_tile's one-pointer path (d = 256: 23 → 3 instructions per chunk in
 * SASS). tools/sm80/tune.cu, bf16, against the per-chunk path: d = 64 +7 %, d = 128 +6 % (though
 * ptxas spills one 64-bit value there), d = 256 +11 % (2026-11-30, bench/LOG.md).
 * Shared memory: (BM + 2·STAGES·BN) · D · 2 bytes. */
template <int D_, int BM_, int BN_, int WARPS_, int STAGES_, int MIN_CTAS_, bool Q_IN_REGS_,
          bool WHOLE_ = true>
struct sm80_tile {
    static constexpr int D = D_, BM = BM_, BN = BN_, WARPS = WARPS_, STAGES = STAGES_;
    static constexpr int MIN_CTAS = MIN_CTAS_, THREADS = 32 * WARPS_, WM = BM_ / (16 * WARPS_);
    static constexpr bool Q_IN_REGS = Q_IN_REGS_, WHOLE = WHOLE_;
    static_assert(D % 64 == 0 && BN % 16 == 0 && WM >= 1 && BM == 16 * WM * WARPS && STAGES >= 1,
                  "tile shape");
};

/* The production tiles, one per head-dim width, from tools/sm80/tune.cu on the H200 (bf16,
 * B·N = 16k, H·d = 2048, N 1k..16k, causal and not; geomean TFLOP/s, 2026-11-30, bench/LOG.md).
 * 4 warps of 32 rows for d <= 128; d = 256 keeps 16 rows per warp (its O alone is 128 registers).
 * All fit sm_86/89's 99 KB. */
typedef sm80_tile< 64, 128, 128, 4, 2, 2, false> sm80_tile_d64;    /* 80 KB: 299; per-chunk loads 278 */
typedef sm80_tile<128, 128,  64, 4, 2, 2, false> sm80_tile_d128;   /* 96 KB: 333; per-chunk loads 313 */
typedef sm80_tile<256,  64,  64, 4, 1, 2, false> sm80_tile_d256;   /* 96 KB: 293; per-chunk 265, 128x64 8 warps 264 */
/* The VAR kernels' tiles: the variants' state does not fit beside the d = 64 and 128 tiles above
 * (ptxas spills 268 and 312 bytes there, sm_90a); with 64-key blocks at d = 64 and 16 rows per
 * warp at d = 128 nothing spills. d = 256 keeps its tile (20 bytes spilled). */
typedef sm80_tile< 64, 128,  64, 4, 2, 2, false> sm80_tile_var_d64;    /* 48 KB */
typedef sm80_tile<128,  64,  64, 4, 2, 2, false> sm80_tile_var_d128;   /* 80 KB */

/* Kernel arguments: the caller's params plus scalars derived once on the host. */
typedef struct {
    fa_params p;
    float scale_log2;        /* |p.scale| · log2(e), at least FLT_MIN: −inf · it stays −inf */
    int neg_scale;           /* p.scale < 0: Q is negated in shared memory, so S·scale_log2 is right */
    int64_t n_q_tiles;       /* ceil(Nq / BM) */
    int64_t q_per_kv;        /* Hq / Hkv */
    int64_t first_block;     /* index of this launch's first CTA in the flattened grid */
    int vec_load;            /* q, k, v rows 16-byte aligned: cp.async; else scalar loads */
    int vec_store;           /* o rows 16-byte aligned: 16-byte stores; else scalar stores */
} sm80_args;

/* A VAR launch (fa_sm80_forward_variants): sm80_args and the resolved variants. */
struct sm80_var_args : sm80_args {
    fa_var var;
};
template <bool VAR>
struct sm80_kargs {
    typedef sm80_args type;
};
template <>
struct sm80_kargs<true> {
    typedef sm80_var_args type;
};

/* Shared memory of one CTA. Element (r, c) of a tile lives in 16-byte chunk (c/8) ^ (r%8). */
template <typename T, class C>
struct sm80_smem {
    T q[C::BM][C::D];                /* Q tile; at the end each warp stages its O rows here */
    T k[C::STAGES][C::BN][C::D];     /* K ring: key block j in stage j % STAGES */
    T v[C::STAGES][C::BN][C::D];     /* V ring, same stage as K */
    uint16_t *o;                     /* o[b, h] and lse[b, h], parked here by thread 0: the key */
    float *lse;                      /* loop needs every register */
};

/* ---- Tile loads ---------------------------------------------------------------------------- */

/* Flips the sign of the chunks of a tile that this thread loaded with load_tile (its own copies
 * must have landed: they are then visible to it without a barrier). */
template <int ROWS, int D, int THREADS>
__device__ __forceinline__ void negate_tile(uint32_t s_tile)
{
    constexpr int CHUNKS = D / 8, STEP = THREADS / CHUNKS;
#pragma unroll
    for (int i = 0; i < ROWS / STEP; i++) {
        const uint32_t addr = s_tile + swz<D>(threadIdx.x / CHUNKS + i * STEP, threadIdx.x % CHUNKS);
        const uint4 x = ld_shared_v4(addr);
        st_shared_v4(addr, make_uint4(x.x ^ 0x80008000u, x.y ^ 0x80008000u,
                                      x.z ^ 0x80008000u, x.w ^ 0x80008000u));
    }
}

/* The whole-tile path in sm_80 code only from d = 256: ptxas spills with it on the d = 64 and 128
 * tiles there (4 and 12 bytes; sm_90a code, the one timed, does not spill). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define SM80_WHOLE_MIN_D 256
#else
#define SM80_WHOLE_MIN_D 0
#endif
template <class C>
__device__ __forceinline__ constexpr bool whole_loads() { return C::WHOLE && C::D >= SM80_WHOLE_MIN_D; }

/* Issues the loads of key block kb (rows kb·BN..) of K or V (g: (Nk, d)) into s_tile. */
template <class C>
__device__ __forceinline__ void load_block(uint32_t s_tile, const uint16_t *g, int64_t row_stride,
                                           int kb, int64_t Nk, const sm80_args &a)
{
    const int64_t row0 = (int64_t)kb * C::BN;
    load_tile<C::BN, C::D, C::THREADS, whole_loads<C>()>(s_tile, g + row0 * row_stride, row_stride,
                                                         (int)(Nk - row0), (int)a.p.d, a.vec_load);
}

/* ---- Kernel -------------------------------------------------------------------------------- */

/* Grid: 1-D, one CTA per (b·Hq + h, query tile); block: C::WARPS warps. VAR: with the variants
 * of a.var (variants.cuh); packed sequences take the grid of their longest, and a tile past its
 * own sequence's end leaves at once. */
template <typename T, class C, bool VAR = false>
__global__ void __launch_bounds__(C::THREADS, C::MIN_CTAS)
fa_sm80_forward_kernel(const __grid_constant__ typename sm80_kargs<VAR>::type a)
{
    constexpr int D = C::D, BM = C::BM, BN = C::BN, WM = C::WM, STAGES = C::STAGES;
    constexpr int THREADS = C::THREADS, WROWS = 16 * WM;        /* query rows per warp */
    extern __shared__ __align__(128) uint8_t smem_raw[];
    sm80_smem<T, C> &s = *reinterpret_cast<sm80_smem<T, C> *>(smem_raw);

    const fa_params &p = a.p;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane / 4, t = lane % 4;               /* fragment row group, column pair */
    const int d = (int)p.d;
    int Nq = (int)p.Nq, Nk = (int)p.Nk;                 /* VAR, packed: this tile's sequence's */
    const float c = VAR ? 1.f : a.scale_log2;            /* VAR: scores arrive in log2 units */

    /* CTA → (b·Hq + h, query tile). A head's tiles are consecutive so its K/V stays in L2;
     * causal runs them last-first: the heaviest tiles (most keys) start earliest. */
    const int64_t blk = a.first_block + blockIdx.x;
    const int64_t bh = blk / a.n_q_tiles, rank = blk % a.n_q_tiles;
    const int m0 = (int)(p.causal ? a.n_q_tiles - 1 - rank : rank) * BM;
    const int64_t b = bh / p.Hq, h = bh % p.Hq, hk = h / a.q_per_kv;

    /* This tile's sequence: rows q0.. of q and o, k0.. of k and v (packed), Nq queries, Nk keys;
     * its key blocks kb0 .. kb0 + n_blocks − 1. Causal: keys past the tile's last row are masked
     * for all its rows, so those blocks are never loaded. Every block below kv_end holds at least
     * one key < Nk. */
    int64_t q0 = 0, k0 = 0, kv_rows = p.Nk;             /* kv_rows: Nk, as load_block reads it */
    int kb0 = 0, n_blocks = 0;
    fa_var_seq seq{};
    fa_var_keys kr = {0, Nk, true};                     /* VAR: key_mask's range (var_keys_cta) */
    if constexpr (VAR) {
        seq = var_seq(a.var, p, b);
        if (seq.packed && !var_packed_tile<THREADS>(a.var, p, seq.Nq, m0))
            return;                                     /* past its sequence's end, or NaN filled */
        q0 = seq.q0, k0 = seq.k0, Nq = seq.Nq, Nk = seq.Nk, kv_rows = seq.Nk;
        kr = var_keys_cta<THREADS>(a.var, seq, b);
        var_blocks<BN>(a.var, seq, kr, m0, min(m0 + BM, Nq) - 1, kb0, n_blocks);
    }
    if (threadIdx.x == 0) {                             /* published by the loop's first barrier */
        s.o = (uint16_t *)p.o + b * p.o_batch_stride + h * p.o_head_stride + q0 * p.o_row_stride;
        if constexpr (VAR)
            s.lse = p.lse == nullptr ? nullptr
                  : a.var.v.cu_seqlens_q != NULL ? p.lse + h * a.var.v.total_q + q0 : p.lse + bh * p.Nq;
        else
            s.lse = p.lse ? p.lse + bh * p.Nq : nullptr;
    }

    /* g_q: rows m0.. of q[b, h] (Nq, d); g_k, g_v: k[b, hk], v[b, hk] (Nk, d) */
    const uint16_t *g_q = (const uint16_t *)p.q + b * p.q_batch_stride + h * p.q_head_stride
                        + (q0 + m0) * p.q_row_stride;
    const uint16_t *g_k = (const uint16_t *)p.k + b * p.k_batch_stride + hk * p.k_head_stride + k0 * p.k_row_stride;
    const uint16_t *g_v = (const uint16_t *)p.v + b * p.v_batch_stride + hk * p.v_head_stride + k0 * p.v_row_stride;
    if constexpr (!VAR) {
        const int kv_end = p.causal ? min(Nk, m0 + BM) : Nk;
        n_blocks = (kv_end + BN - 1) / BN;
    }

    /* Prologue. cp.async groups are committed in the order K0 (with Q), V0, K1, V1, ...; the
     * K ring runs one block ahead of the V ring: K0..K(STAGES−1) and V0..V(STAGES−2) here. */
    load_tile<BM, D, THREADS, whole_loads<C>()>(smem_u32(s.q), g_q, p.q_row_stride, Nq - m0, d, a.vec_load);
    load_block<C>(smem_u32(s.k[0]), g_k, p.k_row_stride, kb0, kv_rows, a);
    cp_async_commit();
#pragma unroll
    for (int j = 1; j < STAGES; j++) {
        if (j - 1 < n_blocks)
            load_block<C>(smem_u32(s.v[j - 1]), g_v, p.v_row_stride, kb0 + j - 1, kv_rows, a);
        cp_async_commit();
        if (j < n_blocks)
            load_block<C>(smem_u32(s.k[j]), g_k, p.k_row_stride, kb0 + j, kv_rows, a);
        cp_async_commit();
    }
    if (a.neg_scale) {                                  /* rare: wait for Q, then flip it */
        cp_async_wait<0>();
        negate_tile<BM, D, THREADS>(smem_u32(s.q));
    }

    const int row0 = m0 + WROWS * warp;                 /* first query row of this warp */
    const bool warp_live = row0 < Nq;                   /* else the warp only helps load */
    /* ldmatrix.x4 of a 16×16 block: for Q and V, lane gives row lane%16, chunk lane/16 of it,
     * i.e. matrices (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15); for K, row
     * lane%8 + 8·(lane/16), chunk (lane/8)%2: (0-7, 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15),
     * so that each MMA's B pair is two adjacent registers. */
    const uint32_t lane_off = swz<D>(lane % 16, lane / 16);
    const uint32_t lane_off_k = swz<D>(lane % 8 + 8 * (lane / 16), (lane / 8) % 2);
    const uint32_t s_q = smem_u32(s.q[WROWS * warp]);   /* this warp's rows of the Q tile */

    float r_o[WM][D / 8][4] = {};                       /* O: WROWS × D of this warp, C layout */
    float m_i[WM][2], l_i[WM][2];                       /* rows 16mt + g, +8; l_i: this thread's columns */
#pragma unroll
    for (int mt = 0; mt < WM; mt++)
        m_i[mt][0] = m_i[mt][1] = -INFINITY, l_i[mt][0] = l_i[mt][1] = 0.f;
    uint32_t r_q[C::Q_IN_REGS ? WM : 1][C::Q_IN_REGS ? D / 16 : 1][4];   /* Q A fragments */
    static_assert(!VAR || !C::Q_IN_REGS, "VAR: a warp's first block may come after kb = 0");

    /* VAR: each m16 tile's rows (variants.cuh), and the keys [w_lo, w_hi) some row of the warp
     * may see; blocks outside them are all masked for the warp. */
    fa_var_rows y[VAR ? WM : 1];
    int w_lo = 0, w_hi = 0;
    if constexpr (VAR) {
        const float scale = fabsf(a.var.scale);             /* its sign is folded into Q */
#pragma unroll
        for (int mt = 0; mt < WM; mt++)
            y[mt] = var_rows(a.var, seq, kr, b, h, row0 + 16 * mt, row0 + 16 * mt + 15, row0 + 16 * mt + g,
                             scale, false);                 /* c = 1: scores in log2 units */
        int unused;
        var_row_range(a.var, seq.delta, row0, Nk, w_lo, unused);
        var_row_range(a.var, seq.delta, min(row0 + WROWS, Nq) - 1, Nk, unused, w_hi);
        w_lo = max(w_lo, kr.lo), w_hi = min(w_hi, kr.hi);
    }

    for (int kb = 0; kb < n_blocks; kb++) {
        /* After K_kb, the groups V_kb .. K_(kb+STAGES−1) may still be in flight. */
        cp_async_wait<2 * STAGES - 2>();
        /* Barrier: every thread's copies of K_kb (and Q) are visible, and every warp has
         * finished block kb−1, whose V stage the load below overwrites. */
        __syncthreads();
        if (kb + STAGES - 1 < n_blocks)
            load_block<C>(smem_u32(s.v[(kb + STAGES - 1) % STAGES]), g_v, p.v_row_stride,
                          kb0 + kb + STAGES - 1, kv_rows, a);
        cp_async_commit();                              /* possibly empty: keeps the count */

        /* Warps past Nq idle; causal: a block starting past the warp's last row is all masked
         * for it. Block 0 shows key 0 to every row, so after it every m_i is finite and no
         * exp2 below sees −inf − −inf. VAR: a row may see no key until a later block, or none. */
        const int key0 = (kb0 + kb) * BN;
        const bool active = VAR ? warp_live && key0 < w_hi && key0 + BN > w_lo
                                : warp_live && !(p.causal && key0 > row0 + WROWS - 1);
        const uint32_t s_k = smem_u32(s.k[kb % STAGES]), s_v = smem_u32(s.v[kb % STAGES]);
        uint32_t r_p[WM][BN / 16][4];                   /* P as A fragments, keys 16kk.. */
        if (active) {
            if constexpr (C::Q_IN_REGS) {
                if (kb == 0) {                          /* Q is visible since the barrier above */
#pragma unroll
                    for (int mt = 0; mt < WM; mt++)
#pragma unroll
                        for (int kk = 0; kk < D / 16; kk++)
                            ldsm_x4(r_q[mt][kk], frag_addr<D>(s_q, lane_off, 16 * mt, 2 * kk));
                }
            }

            /* S = Q Kᵀ: WROWS × BN per warp. K rows are the n index, so plain ldmatrix of K
             * gives the col-major B fragment: matrices (keys 0-7, k lo), (0-7, hi), (8-15, lo),
             * (8-15, hi) are b0, b1 of n-tile 0 and b0, b1 of n-tile 1. */
            float r_s[WM][BN / 8][4] = {};
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                uint32_t r_qk[WM][4];
#pragma unroll
                for (int mt = 0; mt < WM; mt++) {
                    if constexpr (C::Q_IN_REGS) {
#pragma unroll
                        for (int e = 0; e < 4; e++)
                            r_qk[mt][e] = r_q[mt][kk][e];
                    } else {
                        ldsm_x4(r_qk[mt], frag_addr<D>(s_q, lane_off, 16 * mt, 2 * kk));
                    }
                }
#pragma unroll
                for (int np = 0; np < BN / 16; np++) {
                    uint32_t r_k[4];
                    ldsm_x4(r_k, frag_addr<D>(s_k, lane_off_k, 16 * np, 2 * kk));
#pragma unroll
                    for (int mt = 0; mt < WM; mt++) {
                        mma16816<T>(r_s[mt][2 * np], r_qk[mt], r_k[0], r_k[1]);
                        mma16816<T>(r_s[mt][2 * np + 1], r_qk[mt], r_k[2], r_k[3]);
                    }
                }
            }

            /* S = −inf where key >= Nk or (causal) key > row; only blocks on the Nk tail or
             * crossing the warp's diagonal pay for the mask. VAR: every variant, in log2 units. */
            if constexpr (VAR) {
#pragma unroll
                for (int mt = 0; mt < WM; mt++)
                    var_scores<T, BN>(reinterpret_cast<float (&)[BN / 2]>(r_s[mt]), key0, t, y[mt]);
            } else if (key0 + BN > Nk || (p.causal && key0 + BN - 1 > row0)) {
#pragma unroll
                for (int mt = 0; mt < WM; mt++)
#pragma unroll
                    for (int n = 0; n < BN / 8; n++)
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            const int key = key0 + 8 * n + 2 * t + e % 2;
                            const int row = row0 + 16 * mt + g + 8 * (e / 2);
                            if (key >= Nk || (p.causal && key > row))
                                r_s[mt][n][e] = -INFINITY;
                        }
            }

            /* m_new = max(m_i, rowmax(S)); a row lives on the 4 lanes of a quad (same g). */
            float m_new[WM][2];
            bool moved = false;
#pragma unroll
            for (int mt = 0; mt < WM; mt++) {
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    float x = m_i[mt][r];
#pragma unroll
                    for (int n = 0; n < BN / 8; n++)
                        x = fmaxf(x, fmaxf(r_s[mt][n][2 * r], r_s[mt][n][2 * r + 1]));
                    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
                    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
                    m_new[mt][r] = x;
                    moved |= x != m_i[mt][r];
                }
            }

            /* alpha = exp2((m_i − m_new)·c), 0 on the first block (m_i = −inf); O and l_i are
             * rescaled. Skipped when no row of the warp has a new max (most blocks after the
             * first few): alpha would be exactly 1. */
            if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
                for (int mt = 0; mt < WM; mt++)
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        const float alpha = VAR && m_new[mt][r] == -INFINITY ? 1.f
                                                                             : ex2((m_i[mt][r] - m_new[mt][r]) * c);
                        l_i[mt][r] *= alpha;
#pragma unroll
                        for (int n = 0; n < D / 8; n++) {
                            r_o[mt][n][2 * r] *= alpha;
                            r_o[mt][n][2 * r + 1] *= alpha;
                        }
                    }
            }

            /* P = exp2(S·c − m_new·c); l_i += rowsum(P) over this thread's columns (fp32,
             * before rounding). The C fragments of S n-tiles 2kk, 2kk+1 are exactly the A
             * fragment of P for keys 16kk..16kk+15: a0 = (g, 2t..) of tile 2kk, a1 = its row
             * g+8, a2, a3 = tile 2kk+1. */
            float mc[WM][2], cx = c;
            bool huge = false;
#pragma unroll
            for (int mt = 0; mt < WM; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    mc[mt][r] = VAR && m_new[mt][r] == -INFINITY ? 0.f : m_new[mt][r] * c;  /* no key yet: P = 0 */
                    huge |= fabsf(mc[mt][r]) >= FA_EXACT_EXP_FROM;
                }
            /* Past |m_new · c| = FA_EXACT_EXP_FROM in some row of the warp (a warp-uniform vote):
             * S is turned into the exponent (S·c − fl(m_new·c)) − res first, res = m_new·c −
             * fl(m_new·c) (fa_exp_residue), so that the max key's is exactly 0, and the loop below
             * takes it as it is (c = 1, m·c = 0). alpha above, exp2((m_i − m_new)·c), weighs the blocks
             * by the exact products already, and lse's fl(m_i·c) is within res. VAR: c = 1, the
             * exponent is exact already. */
            if (!VAR && __any_sync(0xffffffffu, huge)) {
#pragma unroll
                for (int mt = 0; mt < WM; mt++)
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        const float res = fa_exp_residue(m_new[mt][r], c, mc[mt][r]);
#pragma unroll
                        for (int n = 0; n < BN / 8; n++)
#pragma unroll
                            for (int e = 2 * r; e < 2 * r + 2; e++)
                                r_s[mt][n][e] = fmaf(r_s[mt][n][e], c, -mc[mt][r]) - res;
                        mc[mt][r] = 0.f;
                    }
                cx = 1.f;
            }
#pragma unroll
            for (int mt = 0; mt < WM; mt++) {
                m_i[mt][0] = m_new[mt][0], m_i[mt][1] = m_new[mt][1];
#pragma unroll
                for (int n = 0; n < BN / 8; n++) {
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        r_s[mt][n][e] = ex2(fmaf(r_s[mt][n][e], cx, -mc[mt][e / 2]));
                        l_i[mt][e / 2] += r_s[mt][n][e];
                    }
                    r_p[mt][n / 2][2 * (n % 2)] = pack2<T>(r_s[mt][n][0], r_s[mt][n][1]);
                    r_p[mt][n / 2][2 * (n % 2) + 1] = pack2<T>(r_s[mt][n][2], r_s[mt][n][3]);
                }
            }
        }

        /* After V_kb, the groups K_(kb+1) .. V_(kb+STAGES−1) may still be in flight. */
        cp_async_wait<2 * STAGES - 2>();
        /* Barrier: every thread's copies of V_kb are visible, and every warp has finished
         * S = Q K_kbᵀ, whose K stage the load below overwrites. */
        __syncthreads();
        if (kb + STAGES < n_blocks)
            load_block<C>(smem_u32(s.k[kb % STAGES]), g_k, p.k_row_stride, kb0 + kb + STAGES, kv_rows, a);
        cp_async_commit();

        /* O += P V. V is (key, col) row-major; ldmatrix.trans of 8 keys × 8 cols gives
         * b = (keys 2t.., col g): matrices (keys 0-7, cols lo), (8-15, lo), (0-7, hi),
         * (8-15, hi) are b0, b1 of n-tile 2n2 and b0, b1 of n-tile 2n2+1. */
        if (active) {
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++)
#pragma unroll
                for (int n2 = 0; n2 < D / 16; n2++) {
                    uint32_t r_v[4];
                    ldsm_x4_trans(r_v, frag_addr<D>(s_v, lane_off, 16 * kk, 2 * n2));
#pragma unroll
                    for (int mt = 0; mt < WM; mt++) {
                        mma16816<T>(r_o[mt][2 * n2], r_p[mt][kk], r_v[0], r_v[1]);
                        mma16816<T>(r_o[mt][2 * n2 + 1], r_p[mt][kk], r_v[2], r_v[3]);
                    }
                }
        }
    }

    if (!warp_live)
        return;                                         /* no CTA barrier follows */
    float *const g_lse = s.lse;                         /* lse[b, h]: (Nq), or NULL */

#pragma unroll
    for (int mt = 0; mt < WM; mt++) {
        /* l = rowsum over the quad; l > 0 since each row's max term is exp2(~0). O /= l. VAR:
         * a sink joins the denominator, and a row that saw no key (l = 0) gets O = 0. */
        float inv_l[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float l = l_i[mt][r];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            /* lse = ln Σ exp(scaled scores) = (m_i·c + log2 l) · ln 2; lse: (B, Hq, Nq), or
             * packed (Hq, total_q). */
            const int row = row0 + 16 * mt + g + 8 * r;
            if constexpr (VAR) {
                const float *sinks = a.var.v.sinks;
                float lse2;
                fa_row_end(m_i[mt][r], l, sinks != NULL, sinks != NULL ? sinks[h] * FA_LOG2E : 0.f, &inv_l[r], &lse2);
                if (g_lse && t == 0 && row < Nq)
                    g_lse[row] = lse2 * FA_LN2;
            } else {
                inv_l[r] = 1.f / l;
                if (g_lse && t == 0 && row < Nq)
                    g_lse[row] = fa_lse(m_i[mt][r] * c, l);
            }
        }

        /* Stage this warp's O rows in its own Q rows (only this warp ever read them): C
         * fragment (g + 8r, 8n + 2t..) goes to chunk n of row 16mt + g + 8r, bytes 4t..4t+3. */
#pragma unroll
        for (int n = 0; n < D / 8; n++)
#pragma unroll
            for (int r = 0; r < 2; r++)
                st_shared_u32(s_q + swz<D>(16 * mt + g + 8 * r, n) + 4 * t,
                              pack2<T>(r_o[mt][n][2 * r] * inv_l[r], r_o[mt][n][2 * r + 1] * inv_l[r]));
    }
    /* Warp barrier: the lanes below read chunks that other lanes of the warp wrote. */
    __syncwarp();

    /* o[b, h, row, 8c..8c+7] (s.o: o[b, h], (Nq, d)). */
    store_o_rows<D, WROWS>(s_q, s.o, row0, Nq, d, p.o_row_stride, a.vec_store);
}

/* ---- Host launch --------------------------------------------------------------------------- */

/* Fills the kernel arguments (all but the tile-dependent n_q_tiles and first_block), or returns
 * FA_ERR_UNSUPPORTED for what this kernel family does not run. */
static int sm80_prepare(const fa_params *p, sm80_args *a)
{
    if (p->dtype == FA_FLOAT32)
        return FA_ERR_UNSUPPORTED;                      /* fp32 has its own kernel */
    /* Row and key positions are int in the kernel (element offsets are 64-bit). Nk == 0 (no
     * key for any row) is left to the SIMT kernel. */
    if (p->Nk < 1 || p->Nq > INT32_MAX - 256 || p->Nk > INT32_MAX - 256)
        return FA_ERR_UNSUPPORTED;

    *a = sm80_args{};
    a->p = *p;
    /* Scale 0 would give −inf · 0 = NaN for masked keys; FLT_MIN gives the same exp2 terms
     * (|S| · FLT_MIN rounds away against 1). */
    a->scale_log2 = fmaxf(fabsf(p->scale) * FA_LOG2E, FLT_MIN);
    a->neg_scale = p->scale < 0.f;
    a->q_per_kv = p->Hq / p->Hkv;
    a->vec_load = fa_rows_aligned16(p->q, p->q_batch_stride, p->q_head_stride, p->q_row_stride)
               && fa_rows_aligned16(p->k, p->k_batch_stride, p->k_head_stride, p->k_row_stride)
               && fa_rows_aligned16(p->v, p->v_batch_stride, p->v_head_stride, p->v_row_stride);
    a->vec_store = fa_rows_aligned16(p->o, p->o_batch_stride, p->o_head_stride, p->o_row_stride);
    return FA_OK;
}

/* Launches the tile shape C for element type T (VAR: with a's variants). */
template <typename T, class C, bool VAR = false>
static int sm80_launch(typename sm80_kargs<VAR>::type *a, cudaStream_t stream)
{
    void (*kernel)(const typename sm80_kargs<VAR>::type) = fa_sm80_forward_kernel<T, C, VAR>;
    const size_t smem = sizeof(sm80_smem<T, C>);

    /* Once per device: sm_80+ with enough shared memory (else FA_ERR_UNSUPPORTED, and the SIMT kernel
     * takes over), the dynamic shared-memory limit raised. */
    static unsigned s_raised;
    const int st = fa_tc_prepare((const void *)kernel, smem, 80, &s_raised);
    if (st != FA_OK)
        return st;
    return fa_tc_launch_tiles(kernel, a, C::BM, C::THREADS, smem, stream);
}

#ifndef FA_SM80_NO_ENTRY    /* tools/sm80/tune.cu: tile variants built without the entry point */
extern "C" int fa_sm80_forward(const fa_params *p, cudaStream_t stream)
{
    sm80_args a;
    const int st = sm80_prepare(p, &a);
    if (st != FA_OK)
        return st;
    const int bf16 = p->dtype == FA_BFLOAT16;
    if (p->d <= 64)
        return bf16 ? sm80_launch<__nv_bfloat16, sm80_tile_d64>(&a, stream)
                    : sm80_launch<__half, sm80_tile_d64>(&a, stream);
    if (p->d <= 128)
        return bf16 ? sm80_launch<__nv_bfloat16, sm80_tile_d128>(&a, stream)
                    : sm80_launch<__half, sm80_tile_d128>(&a, stream);
    return bf16 ? sm80_launch<__nv_bfloat16, sm80_tile_d256>(&a, stream)
                : sm80_launch<__half, sm80_tile_d256>(&a, stream);
}

/* A call with variants, packed sequences included: the VAR kernels. */
extern "C" int fa_sm80_forward_variants(const fa_params *p, const fa_variants *v, cudaStream_t stream)
{
    sm80_var_args a;
    const int st = sm80_prepare(p, &a);
    if (st != FA_OK)
        return st;
    if (p->Nq + p->Nk > INT32_MAX - 256)                /* row + δ ± side in 32 bits */
        return FA_ERR_UNSUPPORTED;
    a.var = var_resolve(p, v);
    const int bf16 = p->dtype == FA_BFLOAT16;
    if (p->d <= 64)
        return bf16 ? sm80_launch<__nv_bfloat16, sm80_tile_var_d64, true>(&a, stream)
                    : sm80_launch<__half, sm80_tile_var_d64, true>(&a, stream);
    if (p->d <= 128)
        return bf16 ? sm80_launch<__nv_bfloat16, sm80_tile_var_d128, true>(&a, stream)
                    : sm80_launch<__half, sm80_tile_var_d128, true>(&a, stream);
    return bf16 ? sm80_launch<__nv_bfloat16, sm80_tile_d256, true>(&a, stream)
                : sm80_launch<__half, sm80_tile_d256, true>(&a, stream);
}
#endif
