/*
 * turing.cu — FlashAttention-2 forward for fp16 on Turing's tensor cores (compute capability 7.5:
 * T4, RTX 20xx), built as sm_75 code and compute_75 PTX only, so newer GPUs run it through the
 * driver's JIT when the family is forced (that is how it is tested on an H200).
 *
 * The algorithm and the fragment layouts are sm80.cu's: one CTA owns BM query rows of one
 * (batch, head), each of its 4 warps 16 of them, and walks the key blocks of BN rows keeping the
 * running max m_i (raw score units), the running sum l_i and the fp32 O in registers;
 * c = scale · log2(e):
 *
 *     S = Q Kᵀ                          mma.m16n8k8 (two per 16-wide k step), fp32 accumulate
 *     m_new = max(m_i, rowmax(S)),  P = exp2(S·c − m_new·c)
 *     l_i = l_i · exp2((m_i − m_new)·c) + rowsum(P),  O = O · exp2((m_i − m_new)·c) + P V
 *     O /= l_i,  lse = (m_i·c + log2 l_i) · ln 2
 *
 * What differs from sm_80: Turing has mma.m16n8k8 (not k16) for fp16 and no cp.async, and bf16
 * has no tensor cores there (bf16 runs the simt family). The next block's K and V are staged
 * through registers instead: its global loads are issued before the block in shared memory is
 * used (K_{j+1} before S = Q K_jᵀ, V_{j+1} before O += P V_j) and stored to shared memory after
 * the barrier that frees the buffer, so one K and one V buffer suffice and the load latency hides
 * behind the MMAs. Q goes through the same registers once, its sign flipped there when the
 * scale is negative.
 *
 * Head dims are padded to 64, 128 or 256 (zero columns in shared memory, never stored). Each
 * tile (below) needs (BM + 2·BN)·D·2 bytes of shared memory, within the 64 KB a T4 block may opt
 * in to and its SM has.
 *
 * Reached through fa_turing_forward() (dispatch.cu, after fa_check_params). Builds with plain nvcc;
 * includes CUDA headers and the project's own headers only:
 *     nvcc -std=c++17 -O3 -gencode arch=compute_75,code=[sm_75,compute_75] -Icsrc -Icsrc/cuda -c csrc/cuda/turing.cu
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <float.h>
#include <stdint.h>

#include "families.h"
#include "ptx.cuh"
#include "softmax.cuh"

template <int D_, int BN_>
struct turing_tile {
    static constexpr int D = D_, BM = 64, BN = BN_, WARPS = 4, THREADS = 128;
    static_assert(D % 64 == 0 && BN % 16 == 0, "tile shape");
};
/* The tiles, chosen from shared memory and sm_75 ptxas alone (no T4 to time them on): */
typedef turing_tile<64, 64> turing_tile_d64;      /* 24 KB, 132 registers: 2 CTAs in a T4 SM's 64 KB */
typedef turing_tile<128, 32> turing_tile_d128;    /* 32 KB, 176 registers: 2 CTAs per SM */
typedef turing_tile<256, 16> turing_tile_d256;    /* 48 KB, 244 registers; 32 keys: 64 KB, 120 B spilled */

typedef struct {
    fa_params p;
    float scale_log2;        /* |p.scale| · log2(e), at least FLT_MIN: −inf · it stays −inf */
    uint32_t q_sign;         /* 0x80008000 when p.scale < 0: Q's sign bits flip as it is staged */
    int64_t n_q_tiles;       /* ceil(Nq / BM) */
    int64_t q_per_kv;        /* Hq / Hkv */
    int64_t first_block;     /* index of this launch's first CTA in the flattened grid */
    int vec_load;            /* q, k, v rows 16-byte aligned: 16-byte loads; else 2-byte ones */
    int vec_store;           /* o rows 16-byte aligned: 16-byte stores */
} turing_args;

/* Shared memory of one CTA; element (r, c) of a tile lives in 16-byte chunk (c/8) ^ (r%8). */
template <class C>
struct turing_smem {
    __half q[C::BM][C::D];           /* Q tile; at the end each warp stages its O rows here */
    __half k[C::BN][C::D];           /* key block j */
    __half v[C::BN][C::D];           /* value block j */
};

/* C += A B, m16n8k8, fp32 accumulate: sm80's m16n8k16 fragments (ptx.cuh) as two k8 halves,
 * a0, a1 with b0 (k 0-7) then a2, a3 with b1 (k 8-15). */
__device__ __forceinline__ void mma1688x2(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(b0));
    asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[2]), "r"(a[3]), "r"(b1));
}

/* ---- Register-staged tile loads -------------------------------------------------------------- */

/* One thread's 16-byte chunks of a ROWS × D tile: column chunk threadIdx.x % (D/8) of rows
 * threadIdx.x / (D/8) + i · STEP. */
template <int ROWS, int D, int THREADS>
struct stage {
    static constexpr int CHUNKS = D / 8, STEP = THREADS / CHUNKS, N = ROWS / STEP;
    static_assert(THREADS % CHUNKS == 0 && ROWS % STEP == 0, "tile must split evenly over threads");
    uint4 x[N];

    /* Loads rows 0..ROWS-1 of the global tile g; rows >= rows and columns >= d read as zero.
     * vec: 16-byte rows, one load per whole chunk (a partial last chunk gathers its elements). */
    __device__ __forceinline__ void load(const uint16_t *g, int64_t row_stride, int rows, int d, int vec)
    {
        const int c = threadIdx.x % CHUNKS, nc = max(0, min(8, d - 8 * c));
#pragma unroll
        for (int i = 0; i < N; i++) {
            const int r = threadIdx.x / CHUNKS + i * STEP, n = r < rows ? nc : 0;
            const uint16_t *src = g + r * row_stride + 8 * c;
            x[i] = vec && n == 8 ? __ldg((const uint4 *)src) : n ? load_chunk8(src, n) : make_uint4(0, 0, 0, 0);
        }
    }

    /* Stores the chunks into the swizzled shared tile s, each 32-bit word XOR sign. */
    __device__ __forceinline__ void store(uint32_t s, uint32_t sign = 0) const
    {
#pragma unroll
        for (int i = 0; i < N; i++)
            st_shared_v4(s + swz<D>(threadIdx.x / CHUNKS + i * STEP, threadIdx.x % CHUNKS),
                         make_uint4(x[i].x ^ sign, x[i].y ^ sign, x[i].z ^ sign, x[i].w ^ sign));
    }
};

/* ---- Kernel ---------------------------------------------------------------------------------- */

/* Grid: 1-D, one CTA per (b·Hq + h, query tile), a head's tiles consecutive (its K/V stays in L2),
 * causal ones last-first (the heaviest start earliest); block: 4 warps. */
template <class C>
__global__ void __launch_bounds__(C::THREADS) fa_turing_forward_kernel(const __grid_constant__ turing_args a)
{
    constexpr int D = C::D, BM = C::BM, BN = C::BN, THREADS = C::THREADS;
    extern __shared__ __align__(128) uint8_t smem_raw[];
    turing_smem<C> &s = *reinterpret_cast<turing_smem<C> *>(smem_raw);

    const fa_params &p = a.p;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane / 4, t = lane % 4;               /* fragment row group, column pair */
    const int d = (int)p.d, Nq = (int)p.Nq, Nk = (int)p.Nk;
    const float c = a.scale_log2;

    const int64_t blk = a.first_block + blockIdx.x;
    const int64_t bh = blk / a.n_q_tiles, rank = blk % a.n_q_tiles;
    const int m0 = (int)(p.causal ? a.n_q_tiles - 1 - rank : rank) * BM;
    const int64_t b = bh / p.Hq, h = bh % p.Hq, hk = h / a.q_per_kv;
    const uint16_t *g_q = (const uint16_t *)p.q + b * p.q_batch_stride + h * p.q_head_stride + m0 * p.q_row_stride;
    const uint16_t *g_k = (const uint16_t *)p.k + b * p.k_batch_stride + hk * p.k_head_stride;
    const uint16_t *g_v = (const uint16_t *)p.v + b * p.v_batch_stride + hk * p.v_head_stride;
    /* Causal: keys past the tile's last row are masked for all its rows, so never loaded. */
    const int kv_end = p.causal ? min(Nk, m0 + BM) : Nk;
    const int n_blocks = (kv_end + BN - 1) / BN;

    const uint32_t sq = smem_u32(s.q), sk = smem_u32(s.k), sv = smem_u32(s.v);
    stage<BN, D, THREADS> kv;
    {
        stage<BM, D, THREADS> q;
        q.load(g_q, p.q_row_stride, Nq - m0, d, a.vec_load);
        kv.load(g_k, p.k_row_stride, Nk, d, a.vec_load);
        q.store(sq, a.q_sign);
    }
    kv.store(sk);
    kv.load(g_v, p.v_row_stride, Nk, d, a.vec_load);
    kv.store(sv);

    const int row0 = m0 + 16 * warp;                    /* this warp's 16 query rows */
    const bool warp_live = row0 < Nq;                   /* else the warp only helps load */
    /* ldmatrix.x4 lane addresses, as in sm80.cu: Q and V give row lane%16, chunk lane/16; K gives
     * row lane%8 + 8·(lane/16), chunk (lane/8)%2, so that each MMA's B pair is adjacent. */
    const uint32_t lane_off = swz<D>(lane % 16, lane / 16);
    const uint32_t lane_off_k = swz<D>(lane % 8 + 8 * (lane / 16), (lane / 8) % 2);
    const uint32_t s_q = sq + 16 * warp * D * 2;

    float r_o[D / 8][4] = {};                           /* O: 16 × D of this warp, C layout */
    float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.f, 0.f};   /* rows g, g + 8 */

    for (int kb = 0; kb < n_blocks; kb++) {
        const bool more = kb + 1 < n_blocks;
        const int key0 = kb * BN;
        /* Barrier: block kb's K and V (and Q) stores are visible. */
        __syncthreads();
        if (more)                                       /* in flight during S = Q K_kbᵀ */
            kv.load(g_k + (int64_t)(key0 + BN) * p.k_row_stride, p.k_row_stride, Nk - key0 - BN, d, a.vec_load);

        /* Causal: a block starting past the warp's last row is all masked for it. */
        const bool active = warp_live && !(p.causal && key0 > row0 + 15);
        uint32_t r_p[BN / 16][4];                       /* P as A fragments, keys 16kk.. */
        if (active) {
            float r_s[BN / 8][4] = {};
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                uint32_t r_q[4];
                ldsm_x4(r_q, frag_addr<D>(s_q, lane_off, 0, 2 * kk));
#pragma unroll
                for (int np = 0; np < BN / 16; np++) {
                    uint32_t r_k[4];
                    ldsm_x4(r_k, frag_addr<D>(sk, lane_off_k, 16 * np, 2 * kk));
                    mma1688x2(r_s[2 * np], r_q, r_k[0], r_k[1]);
                    mma1688x2(r_s[2 * np + 1], r_q, r_k[2], r_k[3]);
                }
            }

            /* S = −inf where key >= Nk or (causal) key > row: blocks on the tail or diagonal. */
            if (key0 + BN > Nk || (p.causal && key0 + BN - 1 > row0)) {
#pragma unroll
                for (int n = 0; n < BN / 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int key = key0 + 8 * n + 2 * t + e % 2, row = row0 + g + 8 * (e / 2);
                        if (key >= Nk || (p.causal && key > row))
                            r_s[n][e] = -INFINITY;
                    }
            }

            /* m_new = max(m_i, rowmax(S)) over the quad that holds the row. Block 0 shows key 0 to
             * every row, so m_new is finite from the first block on. */
            float m_new[2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float x = m_i[r];
#pragma unroll
                for (int n = 0; n < BN / 8; n++)
                    x = fmaxf(x, fmaxf(r_s[n][2 * r], r_s[n][2 * r + 1]));
                x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
                m_new[r] = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
                const float alpha = ex2((m_i[r] - m_new[r]) * c);   /* 0 on the first block */
                l_i[r] *= alpha;
#pragma unroll
                for (int n = 0; n < D / 8; n++)
                    r_o[n][2 * r] *= alpha, r_o[n][2 * r + 1] *= alpha;
                m_i[r] = m_new[r];
            }

            /* P = exp2(S·c − m_new·c); the C fragments of n-tiles 2kk, 2kk+1 are P's A fragment
             * for keys 16kk..16kk+15. Past |m_new · c| = FA_EXACT_EXP_FROM in some row of the warp
             * (a warp-uniform vote, as sm80.cu's) S is turned into the exponent (S·c − fl(m_new·c))
             * − res first, res = m_new·c − fl(m_new·c) (fa_exp_residue), so that the max key's is
             * exactly 0, and the loop below takes it as it is (c = 1, m·c = 0). */
            float mc[2] = {m_new[0] * c, m_new[1] * c}, cx = c;
            if (__any_sync(0xffffffffu, fabsf(mc[0]) >= FA_EXACT_EXP_FROM || fabsf(mc[1]) >= FA_EXACT_EXP_FROM)) {
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const float res = fa_exp_residue(m_new[r], c, mc[r]);
#pragma unroll
                    for (int n = 0; n < BN / 8; n++)
#pragma unroll
                        for (int e = 2 * r; e < 2 * r + 2; e++)
                            r_s[n][e] = fmaf(r_s[n][e], c, -mc[r]) - res;
                    mc[r] = 0.f;
                }
                cx = 1.f;
            }
#pragma unroll
            for (int n = 0; n < BN / 8; n++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    r_s[n][e] = ex2(fmaf(r_s[n][e], cx, -mc[e / 2]));
                    l_i[e / 2] += r_s[n][e];
                }
                r_p[n / 2][2 * (n % 2)] = pack2<__half>(r_s[n][0], r_s[n][1]);
                r_p[n / 2][2 * (n % 2) + 1] = pack2<__half>(r_s[n][2], r_s[n][3]);
            }
        }

        /* Barrier: every warp is done with K_kb; K_(kb+1) takes its buffer. */
        __syncthreads();
        if (more) {
            kv.store(sk);
            kv.load(g_v + (int64_t)(key0 + BN) * p.v_row_stride, p.v_row_stride, Nk - key0 - BN, d, a.vec_load);
        }

        /* O += P V; ldmatrix.trans of V gives the col-major B fragments (sm80.cu). */
        if (active) {
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++)
#pragma unroll
                for (int n2 = 0; n2 < D / 16; n2++) {
                    uint32_t r_v[4];
                    ldsm_x4_trans(r_v, frag_addr<D>(sv, lane_off, 16 * kk, 2 * n2));
                    mma1688x2(r_o[2 * n2], r_p[kk], r_v[0], r_v[1]);
                    mma1688x2(r_o[2 * n2 + 1], r_p[kk], r_v[2], r_v[3]);
                }
        }
        if (more) {
            /* Barrier: every warp is done with V_kb; V_(kb+1) takes its buffer. */
            __syncthreads();
            kv.store(sv);
        }
    }

    if (!warp_live)
        return;                                         /* no CTA barrier follows */
    float inv_l[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float l = l_i[r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        inv_l[r] = 1.f / l;                             /* l ≥ 1: the row's max term is exp2(0) */
        const int row = row0 + g + 8 * r;
        if (p.lse && t == 0 && row < Nq)
            p.lse[bh * p.Nq + row] = fa_lse(m_i[r] * c, l);
    }

    /* Stage this warp's O rows in its own Q rows (only this warp read them), then store. */
#pragma unroll
    for (int n = 0; n < D / 8; n++)
#pragma unroll
        for (int r = 0; r < 2; r++)
            st_shared_u32(s_q + swz<D>(g + 8 * r, n) + 4 * t,
                          pack2<__half>(r_o[n][2 * r] * inv_l[r], r_o[n][2 * r + 1] * inv_l[r]));
    __syncwarp();
    store_o_rows<D, 16>(s_q, (uint16_t *)p.o + b * p.o_batch_stride + h * p.o_head_stride, row0, Nq, d,
                        p.o_row_stride, a.vec_store);
}

/* ---- Host launch ----------------------------------------------------------------------------- */

template <class C>
static int turing_launch(turing_args *a, cudaStream_t stream)
{
    void (*kernel)(const turing_args) = fa_turing_forward_kernel<C>;
    const size_t smem = sizeof(turing_smem<C>);
    static unsigned s_raised;
    const int st = fa_tc_prepare((const void *)kernel, smem, 75, &s_raised);
    if (st != FA_OK)
        return st;
    return fa_tc_launch_tiles(kernel, a, C::BM, C::THREADS, smem, stream);
}

/* fp16 only, Nk >= 1 (Nk == 0 is the simt family's), positions in 32 bits. */
extern "C" int fa_turing_forward(const fa_params *p, cudaStream_t stream)
{
    if (p->dtype != FA_FLOAT16 || p->Nk < 1 || p->Nq > INT32_MAX - 256 || p->Nk > INT32_MAX - 256)
        return FA_ERR_UNSUPPORTED;
    turing_args a = {};
    a.p = *p;
    a.scale_log2 = fmaxf(fabsf(p->scale) * FA_LOG2E, FLT_MIN);
    a.q_sign = p->scale < 0.f ? 0x80008000u : 0u;
    a.q_per_kv = p->Hq / p->Hkv;
    a.vec_load = fa_rows_aligned16(p->q, p->q_batch_stride, p->q_head_stride, p->q_row_stride)
              && fa_rows_aligned16(p->k, p->k_batch_stride, p->k_head_stride, p->k_row_stride)
              && fa_rows_aligned16(p->v, p->v_batch_stride, p->v_head_stride, p->v_row_stride);
    a.vec_store = fa_rows_aligned16(p->o, p->o_batch_stride, p->o_head_stride, p->o_row_stride);
    if (p->d <= 64)
        return turing_launch<turing_tile_d64>(&a, stream);
    if (p->d <= 128)
        return turing_launch<turing_tile_d128>(&a, stream);
    return turing_launch<turing_tile_d256>(&a, stream);
}
