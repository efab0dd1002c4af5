/*
 * sm90_walk.cuh — where the Hopper forward kernel's work items are (sm90.cu includes it after
 * sm90_steps.cuh, before sm90_kernel.cuh). In order:
 *   Tiles and work items   tile_pos, item_pos, cta_tile (the persistent walk), walk_item
 *   Packed sequences       the walk over the sequences' query tiles: packed_find (the producer's
 *                          cursor), packed_put / packed_take (its ring to the consumers), packed_item;
 *                          any_item, the item either walk gives
 */
#ifndef FA_SM90_WALK_CUH
#define FA_SM90_WALK_CUH

/* ---- Tiles and work items ------------------------------------------------------------------ */

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
        const uint32_t sec = fast_div(a.div_sec, t), in = t - sec * a.div_sec.d;
        rank = fast_div(a.div_heads, in);
        bh = sec * a.div_heads.d + in - rank * a.div_heads.d;
        if (a.pairs)                                /* positions 2i, 2i + 1: ranks i, last − i */
            rank = rank & 1 ? a.div_full_q.d - 1 - (rank >> 1) : rank >> 1;
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
 * a.snake odd passes run backwards, so a CTA that took a heavy tile then takes a light one. With
 * a.pairs the grid passes over pairs of tiles (tile_pos orders each head's tiles heaviest, lightest,
 * second heaviest, ...), CTA c taking pair c of each pass. Either way a pass lies wholly after the
 * previous one, so the first tile past the end ends the walk. */
__device__ __forceinline__ int64_t cta_tile(const sm90_args &a, int it)
{
    const int64_t c = blockIdx.x;
    if (a.pairs)                                    /* pass it / 2 over the pairs, pair c of it */
        return ((int64_t)(it >> 1) * a.tile_stride + c) * 2 + (it & 1);
    return (int64_t)it * a.tile_stride + (a.snake && (it & 1) ? a.tile_stride - 1 - c : c);
}

/* Work item `item` of this CTA's walk, as producer and consumers both see it; VAR: its key blocks
 * narrowed to those its rows can see (windows, key_mask: var_blocks), and its batch entry's key
 * range in kr. */
template <class C, bool SPLIT, int VAR, class A>
__device__ __forceinline__ sm90_item walk_item(const A &a, int64_t item, const fa_var_seq &seq, uint32_t keys,
                                               int Nq, int Nk, fa_var_keys &kr)
{
    sm90_item w = item_pos<C, SPLIT>(a, item);
    if constexpr (VAR) {
        kr = var_keys_get(a.var, keys, a.key_rows, w.tp.b, Nk);
        var_blocks<C::BN>(a.var, seq, kr, w.tp.m0, min(w.tp.m0 + C::BM, Nq) - 1, w.kb0, w.nb);
    }
    return w;
}

/* ---- Packed sequences ---------------------------------------------------------------------- */

/* Packed sequences (the PACKED kernels): the query tiles that exist, sequence after sequence.
 * The same walk also runs an unpacked call's batch entries as B sequences of Nq and Nk rows
 * (cu_seqlens_q NULL: var_seq's whole problem at rows 0, the tensor maps per batch entry;
 * fa_plan_sm90_counter says when), so that its tiles too come from the counter.
 * Non-causal, each head's tiles together (they share its K and V in L2): item x is query tile
 * `rank` of head h of sequence b, x = P_b + h · nt_b + rank, with nt_b = ceil(Nq_b / BM) and P_b
 * the items of the sequences before b. Causal, the sequence's tiles rank by rank over sections of
 * S of its heads (div_heads.d, fa_plan_sm90_packed_heads; S = Hq: all of them), heaviest first:
 * x = P_b + sec · S · nt_b + rank · S + (h − sec · S), the tile rank from the end (bench/LOG.md,
 * 2026-12-04, tenth session: over all heads, 0.973 → 0.997× FA3's varlen, causal). The host does
 * not know the lengths (cu_seqlens stay on the GPU), so the producer finds each item in cu_seqlens
 * with a cursor that only moves forward: a CTA's items only grow. CTA c takes item c, then, with a counter (a.tile_counter, zeroed before
 * the launch), tile_stride + the counter's old value, fetched as its current item's last block is
 * issued, so that a CTA takes an item only when it is nearly free; without one, every
 * tile_stride-th item. The producer hands each item to the consumers through sm90_packed_ring, past
 * the shared struct. */
struct sm90_packed_ring {
    uint64_t full[2], empty[2];         /* item j in slot j % 2: written / read by every consumer warp */
    int item[2][8];                     /* b (−1: none left), h, m0, q0, k0, Nq, Nk, unused */
};

/* The producer's place among the sequences: sequence b, the items before it (first) and its query
 * tiles nt (−1: not read yet); its rows are in the item (packed_find). In 32 bits: fewer than 2²⁹
 * items (sm90_launch), and a CTA's place passes the last by at most the grid. The producer has 24
 * or 32 registers. */
struct sm90_packed_cursor {
    int b, nt, first;
};

/* Item x of the walk in v (v[0] = −1 past the last), the cursor moved up to its sequence, whose
 * rows v[3..6] keep until it moves on. */
template <int BM>
__device__ __forceinline__ void packed_find(const sm90_var_args &a, int x, sm90_packed_cursor &cur, int (&v)[8])
{
    const fa_params &p = a.p;
    for (;;) {
        if (cur.b >= p.B) {
            v[0] = -1;
            return;
        }
        if (cur.nt < 0) {
            const fa_var_seq sq = var_seq(a.var, p, cur.b);
            v[3] = (int)sq.q0, v[4] = (int)sq.k0, v[5] = sq.Nq, v[6] = sq.Nk;
            cur.nt = (sq.Nq + BM - 1) / BM;
        }
        const int n = (int)p.Hq * cur.nt;
        if (x - cur.first < n)
            break;
        cur.first += n;
        cur.b++;
        cur.nt = -1;
    }
    /* Causal: sections of div_heads.d heads, each rank-major; else head-major (plan.h). */
    int h, rank;
    fa_plan_packed_place(x - cur.first, cur.nt, (int)a.div_heads.d, p.causal, &h, &rank);
    v[0] = cur.b, v[1] = h, v[2] = (p.causal ? cur.nt - 1 - rank : rank) * BM, v[7] = 0;
}

#ifdef FA_SM90_DEVICE
/* The producer: item j into its slot, once every consumer warp has read the item two before. */
__device__ __forceinline__ void packed_put(sm90_packed_ring &ring, int j, const int (&v)[8])
{
    mbar_wait(&ring.empty[j % 2], ((j / 2) & 1) ^ 1);
#pragma unroll
    for (int i = 0; i < 8; i++)
        ring.item[j % 2][i] = v[i];
    mbar_arrive(&ring.full[j % 2]);
}

/* A consumer warp: item j, lane 0's copy (warp-uniform to the compiler, so that the ring's stages
 * and the wgmma descriptors derived from it stay in uniform registers). */
__device__ __forceinline__ void packed_take(sm90_packed_ring &ring, int j, int lane, int (&v)[8])
{
    mbar_wait(&ring.full[j % 2], (j / 2) & 1);
#pragma unroll
    for (int i = 0; i < 8; i++)
        v[i] = __shfl_sync(0xffffffffu, ring.item[j % 2][i], 0);
    release(&ring.empty[j % 2], lane);
}
#endif

/* A packed item as a work item: its tile, its sequence in seq, its key blocks (var_blocks). */
template <class C>
__device__ __forceinline__ sm90_item packed_item(const sm90_var_args &a, const int (&v)[8], fa_var_seq &seq,
                                                 fa_var_keys &kr)
{
    sm90_item w;
    w.tp.b = v[0], w.tp.h = v[1], w.tp.m0 = v[2];
    w.tp.bh = (int64_t)v[0] * a.p.Hq + v[1];
    w.tp.hk = (int)fast_div(a.div_q_per_kv, (uint32_t)v[1]);
    w.tp.n_blocks = 0;
    seq.q0 = v[3], seq.k0 = v[4], seq.Nq = v[5], seq.Nk = v[6];
    seq.delta = a.var.v.align == FA_ALIGN_BOTTOM_RIGHT ? seq.Nk - seq.Nq : 0;
    seq.packed = a.var.v.cu_seqlens_q != NULL;        /* else an unpacked call's batch entry b */
    seq.total_q = a.var.v.total_q;
    kr = fa_var_keys{0, seq.Nk, true};
    w.j = -1;
    var_blocks<C::BN>(a.var, seq, kr, w.tp.m0, min(w.tp.m0 + C::BM, seq.Nq) - 1, w.kb0, w.nb);
    return w;
}

/* Work item `item` as producer and consumers both see it: walk_item's, or PACKED the item pk
 * (packed_item); sq: its sequence (seq, the whole problem, unless packed). */
template <class C, bool SPLIT, int VAR, bool PACKED, class A>
__device__ __forceinline__ sm90_item any_item(const A &a, int64_t item, const int (&pk)[8], const fa_var_seq &seq,
                                              uint32_t keys, fa_var_seq &sq, fa_var_keys &kr)
{
    sq = seq;
    if constexpr (PACKED)
        return packed_item<C>(a, pk, sq, kr);
    else
        return walk_item<C, SPLIT, VAR>(a, item, seq, keys, VAR ? seq.Nq : (int)a.p.Nq, VAR ? seq.Nk : (int)a.p.Nk,
                                        kr);
}

#endif /* FA_SM90_WALK_CUH */
