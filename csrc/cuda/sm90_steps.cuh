/*
 * sm90_steps.cuh — the Hopper forward kernel's arguments, shared memory and consumer steps (sm90.cu
 * includes it, then sm90_kernel.cuh): the launch-time divisor, sm90_args, the shared-memory struct of a
 * tile (Q buffers, K/V rings, barriers, the staged mask's ring), and the consumers' per-block steps
 * (Q Kᵀ and P V issue, stage release, the online softmax, the O rescale). Needs the headers sm90.cu
 * includes before it.
 */
#ifndef FA_SM90_STEPS_CUH
#define FA_SM90_STEPS_CUH

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
    /* The order of the tiles (tile_pos): tiles below n_full walk sections of div_heads.d heads
     * (b·Hq + h consecutive; div_sec.d = div_heads.d · div_full_q.d tiles each), a section's tiles
     * rank by rank (div_full_q.d ranks per head; causal: heaviest first), so one head's tiles go
     * together when div_heads.d = 1; the tiles past them, if any, are the heads' last query tiles,
     * one per head, moved to the end (plan.c, fa_plan_sm90_walk). */
    int64_t n_full;
    sm90_divisor div_q_tiles, div_full_q, div_bh, div_hq, div_q_per_kv;  /* n_q_tiles, n_full_q,
                                                                             B · Hq, Hq, Hq / Hkv */
    sm90_divisor div_sec, div_heads;     /* a section's tiles, its heads (PACKED: the heads of a
                                          * causal sequence's section, packed_find) */
    int64_t tile_stride;                 /* persistent: the grid size; else n_tiles (one tile per CTA) */
    int snake;                           /* every other pass of the grid runs backwards: cta_tile */
    int pairs;                           /* causal, one head per section: a CTA takes two tiles at a
                                          * time, a head's i-th heaviest and i-th lightest (cta_tile,
                                          * tile_pos) */
    /* Work items (item_pos): items below n_whole are whole tiles; the n_split items past them are
     * the parts of the next n_split / parts tiles, split along the keys (the last, partly filled
     * round of a persistent grid), which store (O / l, lse) in fp32 to o_part / lse_part for
     * fa_sm90_merge_kernel; the items after those are whole tiles again. parts = 1: no split,
     * n_items = n_whole = n_tiles. */
    int64_t n_items, n_whole, n_split;
    int parts;
    float *o_part;                       /* (tail item, BM rows, d) */
    float *lse_part;                     /* (tail item, BM rows), log2 units */
    const float *sinks;                  /* SM90_SINK kernels: each query head's sink (fa_variants.sinks) */
    const float *alibi;                  /* SM90_ALIBI kernels: ALiBi slopes (Hq), or (B, Hq) rows */
    int64_t alibi_batch_stride;          /* apart (0: one row for every batch entry) */
} sm90_args;

/* The variants a plain kernel may carry (its EXTRA template argument): a sink in each row's
 * denominator, added at the row's end and in a split tile's merge; ALiBi's −slope · |i − j|, loaded
 * into the S accumulator before Q Kᵀ lands on it (sm90_alibi_init). */
enum { SM90_SINK = 1, SM90_ALIBI = 2 };

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

#include <type_traits>

#include "sm90_variants.cuh"

#ifdef FA_SM90_DEVICE
/* ---- Consumer steps ------------------------------------------------------------------------ */

/* S = Q Kᵀ (64 × BN) issued as D/16 wgmmas down the panels, 32 bytes of Q and K each; s_q: this
 * warpgroup's rows of Q panel 0, s_k: the K stage. Completes at the next wgmma_wait. */
template <typename T, class C, bool ONTO = false>
__device__ __forceinline__ void issue_qk(float (&r_s)[C::BN / 2], uint32_t s_q, uint32_t s_k)
{
    wgmma_fence();
    issue_ab_t<T, C::D, C::BN, C::BM * 128, C::BN * 128, ONTO>(r_s, s_q, s_k);
}

/* S's accumulator for the block of keys key0.. (element i: row row0 + 8·((i/2)%2), key key0 +
 * 8·(i/4) + 2t + i%2) set to ALiBi's term relative to the block's key j_r where that term is
 * heaviest for row i (the nearest key for a slope ≥ 0, the farthest visible one for a negative
 * one), so that once Q Kᵀ is issued onto it (issue_qk ONTO) S = Q Kᵀ − sl · (|i − j| − near[r]),
 * sl = slope / scale (the scores' own units), near[r] = |i − j_r|; the softmax takes slope · near[r]
 * off in log2 units (sm90_softmax's ALiBi form). The term costs the warps' wait for their turn, not
 * the softmax's path; what the wgmma's k-steps round S onto is at most |sl| · BN (summing onto
 * −sl · |i − j| itself rounds each k-step at the distance's own magnitude). j_r is visible whenever
 * the row sees any key of the block (causal: key0, not the block's last key, for a negative slope),
 * and its value is exactly 0 but where gentle: sl times an exact small integer, one rounding. A
 * block wholly on one side of both rows gives both the same values; gentle (|slope| ≤ 1, uniform
 * over the tile) as one fused multiply-add of the full slope per score, which leaves j_r the
 * rounding of sl · k, within 2^−24 · |slope| · (BN + 6) nats (8e-6 at most): steeper slopes would
 * carry it to NaN rows (1e20, emulated), and a slope with its low bits cleared instead was
 * 2^−15 off, past the rule with large logits (bench/LOG.md 2026-12-06-alibi-plain). */
template <int BN>
__device__ __forceinline__ void sm90_alibi_init(float (&r_s)[BN / 2], float (&near)[2], int key0, int row0, int t,
                                                float sl, int Nk, bool causal, bool gentle)
{
    /* The block's last key that exists (keys past Nk are masked: none of them can be j_r). */
    const int last = min(key0 + BN, Nk) - 1;
    const bool up = sl >= 0.f;                          /* the term heaviest at the nearest key */
    if (last <= row0 || key0 >= row0 + 8) {             /* left of both rows, or right of both */
        const bool left = last <= row0;
        const int ref = left == up ? last : key0;
        /* The term at column k: sl · (nb + k) left, sl · (nb − k) right, nb + k the key's signed
         * distance from j_r. */
        const float nb = (float)(left ? key0 + 2 * t - ref : ref - key0 - 2 * t), sk = left ? sl : -sl;
        if (gentle) {
            const float base = sl * nb;
#pragma unroll
            for (int i = 0; i < BN / 2; i++)
                r_s[i] = fmaf(sk, (float)(8 * (i / 4) + i % 2), base);
        } else {
            const float one = left ? 1.f : -1.f;
#pragma unroll
            for (int i = 0; i < BN / 2; i++)
                r_s[i] = sl * fmaf(one, (float)(8 * (i / 4) + i % 2), nb);   /* exact, then one rounding */
        }
#pragma unroll
        for (int r = 0; r < 2; r++)
            near[r] = (float)(left ? row0 + 8 * r - ref : ref - row0 - 8 * r);
    } else {
        float d0[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = row0 + 8 * r;
            const int ref = up ? min(max(row, key0), last) : (causal || row - key0 >= last - row ? key0 : last);
            d0[r] = (float)(row - key0 - 2 * t);
            near[r] = (float)abs(row - ref);
        }
#pragma unroll
        for (int i = 0; i < BN / 2; i++)
            r_s[i] = -sl * (fabsf(d0[(i / 2) % 2] - (float)(8 * (i / 4) + i % 2)) - near[(i / 2) % 2]);
    }
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

/* The scores as they are (sm90_softmax's f). */
struct sm90_same {
    __device__ __forceinline__ float operator()(float s) const { return s; }
};

/* The online softmax of the block of keys key0..key0+BN−1, in place (OFF, ALiBi: each row's scores
 * are r_s · c − slope2 · near[r] in log2 units, near from sm90_alibi_init; the running max is kept
 * as m_i = its element's r_s · c and near_m[r], its block's near, so that blocks far from the row
 * are weighed against each other through small differences and the heaviest key's exponent is
 * exact, as in the variant kernel's log2 scores):
 *     S = −inf where key >= Nk or (causal) key > row     (tail and diagonal blocks only)
 *     m_new = max(m_i, rowmax(S)),  alpha = exp2((m_i − m_new)·c)   (0 on the first block)
 *     P = exp2(S·c − m_new·c),  l_i = l_i·alpha + rowsum(P)  (this thread's columns)
 * r_s: element i is (row row0 + 8·((i/2)%2), key key0 + 8·(i/4) + 2t + i%2). f: a non-decreasing
 * map of each score (a softcap's tanh) taken here rather than before: S above is f(r_s), its row
 * max f(rowmax(r_s)), so that the maps need not all be done before the max, nor the max before the
 * exponentials start (the max element's own map gives back the max exactly). */
template <class C, int VAR = FA_VAR_NONE, class F = sm90_same, bool OFF = false>
__device__ __forceinline__ void sm90_softmax(float (&r_s)[C::BN / 2], float (&m_i)[2], float (&l_i)[2],
                                             float (&alpha)[2], int key0, const sm90_softmax_ctx &x,
                                             const F &f = F(), const float *near = nullptr, float slope2 = 0.f,
                                             float *near_m = nullptr)
{
    constexpr int BN = C::BN;
    /* VAR (the kernel's FA_VAR_*): S arrives masked (var_scores), in log2 units with c = 1 or raw
     * with c the scale's, and a row may have seen no key yet (m = −inf): P = 0 then, and nothing
     * to rescale. */
    if (!VAR && (key0 + BN > x.Nk || (x.causal && key0 + BN - 1 > x.row_first))) {
#pragma unroll
        for (int i = 0; i < BN / 2; i++) {
            const int key = key0 + 8 * (i / 4) + 2 * x.t + i % 2;
            const int row = x.row0 + 8 * ((i / 2) % 2);
            if (key >= x.Nk || (x.causal && key > row))
                r_s[i] = -INFINITY;
        }
    }
    constexpr bool same = std::is_same<F, sm90_same>::value;
    static_assert(VAR || OFF || same, "the plain kernels' huge-score test reads the running max");
    constexpr bool exact = same && !OFF && VAR != FA_VAR_CAP;  /* the exact exponents below */
    float mc[2];
    bool huge = false;
#pragma unroll
    for (int r = 0; r < 2; r++) {                       /* a row lives on the 4 lanes of a quad */
        float m = same && !OFF ? m_i[r] : -INFINITY;    /* else the block's raw max first */
#pragma unroll
        for (int j = 0; j < BN / 8; j++)
            m = fmaxf(m, fmaxf(r_s[4 * j + 2 * r], r_s[4 * j + 2 * r + 1]));
        if constexpr (exact)                            /* this lane's max, before the quad's */
            huge |= fabsf(m * x.c) >= FA_EXACT_EXP_FROM && m != -INFINITY;
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
        if constexpr (!same)
            m = fmaxf(m_i[r], m == -INFINITY ? m : f(m));
        /* Lazy: the running max moves only when the block's max passes it by more than
         * FA_SM90_LAZY (log2 units; the first block, NaN and inf always move it), so P stays
         * at most 2^FA_SM90_LAZY and O needs no rescale (alpha = 1). */
        if constexpr (OFF) {
            /* The max in two parts: m_i = S · c of its element (log2 units, no ALiBi term) and
             * near_m, its block's nearest-key distance; the block's own by how much it passes it. */
            const float cand = m * x.c;
            const float diff = m_i[r] == -INFINITY ? INFINITY : fmaf(-slope2, near[r] - near_m[r], cand - m_i[r]);
            if (!(diff <= (float)FA_SM90_LAZY)) {      /* passes it (NaN too), by more than LAZY */
                alpha[r] = ex2(-diff);
                l_i[r] *= alpha[r];
                m_i[r] = cand;
                near_m[r] = near[r];
            } else {
                alpha[r] = 1.f;
            }
            /* exp2(S·c − slope · (near − near_m) − m_i): the heaviest key's exponent is its S · c
             * less that rounded, as in the plain kernel. A block the row sees nothing of: 0, so that
             * P is 0 whatever the offset (which may overflow). */
            mc[r] = m == -INFINITY ? 0.f : fmaf(slope2, near[r] - near_m[r], m_i[r]);
            continue;
        }
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
    /* Exact exponents past |m_i · c| = FA_EXACT_EXP_FROM in some row of the warp: P = exp2((S·c −
     * fl(m_i·c)) − res), res = m_i·c − fl(m_i·c) (fa_exp_residue), the max key's exponent exactly 0;
     * alpha above, exp2((m_i − m)·c), weighs the blocks by the exact products already, and lse's
     * fl(m_i · c) is within res. S is turned into that exponent here, and the loop below takes it
     * with c = 1, m_i·c = 0, so that ordinary blocks run the loop as before.
     * The test is a warp vote (the branch is warp-uniform, no wgmma or barrier inside) on each
     * lane's own max, taken before the quad's shuffles so that it is off the path to the
     * exponentials: a row max past the bound has a lane max past it too, in either sign; a lane max
     * of −inf (every key of the lane masked) does not count; a lane max past it whose row max is
     * not only takes this path with res = 0, the same exponents.
     * Where f is the identity: the plain kernels, and the VAR kernels, whose scores arrive raw
     * (y.raw: scale · log2 e in c, as the plain kernel's) or in log2 units (c = 1: res is 0, the
     * same exponents as the loop's). The ALiBi form (OFF) keeps its own. The softcap kernels
     * (FA_VAR_CAP: a softcap, ALiBi) do not take it: a softcap bounds |S · c| by softcap · log2 e
     * (past the bound only from a softcap of 7.3e5), ALiBi's scores arrive in log2 units, and the
     * test cost their d = 256 kernels 3 % (bench/LOG.md 2026-12-06-fourth). */
    float cx = x.c;
    if (exact && __any_sync(0xffffffffu, huge)) {
        const float res[2] = {fa_exp_residue(m_i[0], x.c, mc[0]), fa_exp_residue(m_i[1], x.c, mc[1])};
#pragma unroll
        for (int i = 0; i < BN / 2; i++)
            r_s[i] = fmaf(r_s[i], x.c, -mc[(i / 2) % 2]) - res[(i / 2) % 2];
        cx = 1.f;
        mc[0] = mc[1] = 0.f;
    }
#pragma unroll
    for (int i = 0; i < BN / 2; i++) {
        r_s[i] = ex2(fmaf(f(r_s[i]), cx, -mc[(i / 2) % 2]));
        l_i[(i / 2) % 2] += r_s[i];
    }
}

/* Ends the basic block after the softmax with a branch on its result (never taken: l_i >= 0 or
 * NaN). Without it ptxas hoists the next wgmma wait (WARPGROUP.DEPBAR) above the softmax, which
 * then runs after O += P V has completed instead of beside it. That costs the d = 256 tile 5 % and
 * the d = 128 causal tile 2-3 % from 8k keys (sm90_tile_fenced); on shorter or non-causal calls at
 * d <= 128 the other warpgroups' turns keep the tensor cores as busy either way. */
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
/* C::RESCALE_EARLY: O ·= alpha (a block's) runs after the next block's S = Q Kᵀ is issued, just
 * before its P V, instead of between the P V wait and that issue: the rescale leaves the
 * warpgroup's serial path (P V wait, pack, K / V wait, turn, issue) for the issue window, where
 * the warps wait on the tensor cores anyway. */
#ifndef FA_SM90_RESCALE_EARLY       /* 1 on every tile, 0 on none; default: C::RESCALE_EARLY */
#define FA_SM90_RESCALE_EARLY -1
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

#endif /* FA_SM90_STEPS_CUH */
