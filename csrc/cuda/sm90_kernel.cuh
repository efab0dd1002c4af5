/*
 * sm90_kernel.cuh — the Hopper forward kernel (sm90.cu includes it after sm90_steps.cuh and
 * sm90_walk.cuh, whose any_item gives each CTA its work items). The algorithm and layouts are
 * described at the top of sm90.cu. In order:
 *   The kernel             fa_sm90_forward_kernel: prologue and barriers, the producer's loads, the
 *                          consumers' block loop, the epilogue (lse, O through TMA or row stores)
 *   The merge              fa_sm90_merge_kernel, for a split last round
 */
#ifndef FA_SM90_KERNEL_CUH
#define FA_SM90_KERNEL_CUH

/* ---- The kernel ---------------------------------------------------------------------------- */

/* PACKED (VAR only): a packed call's kernel, walking the items of packed_find. EXTRA (a plain
 * kernel's SM90_SINK / SM90_ALIBI): each row of a whole tile ends with its head's sink (a.sinks) in
 * the denominator, as a VAR kernel's rows do, a split tile's parts leaving it to the merge; each
 * block's S starts from ALiBi's term (sm90_alibi_init); the rest is the plain kernel's code. */
template <typename T, class C, bool SPLIT, int VAR, bool PACKED, int EXTRA = 0>
__global__ void __launch_bounds__(C::THREADS, 1)
fa_sm90_forward_kernel(const __grid_constant__ typename sm90_kargs<VAR>::type a)
{
#ifdef FA_SM90_DEVICE
    constexpr int D = C::D, BM = C::BM, BN = C::BN, STAGES = C::STAGES, PANELS = C::PANELS;
    constexpr bool STORE_DEFER = FA_SM90_STORE_DEFER && C::QBUFS == 2;
    constexpr bool MSMEM = C::MASK_STAGES > 0;                  /* attn_mask blocks land with K's */
    constexpr bool RESCALE_EARLY = FA_SM90_RESCALE_EARLY < 0 ? C::RESCALE_EARLY : FA_SM90_RESCALE_EARLY > 0;
    constexpr bool V_LAG = FA_SM90_V_LAG;                       /* tiles.h */
    static_assert(!MSMEM || VAR == FA_VAR_ALL, "a staged mask is a variant");
    static_assert(!PACKED || (VAR && !SPLIT && !MSMEM), "packed sequences: a variant kernel, tiles whole");
    constexpr bool SINK = EXTRA & SM90_SINK, ALIBI = EXTRA & SM90_ALIBI;
    constexpr int CAUSAL_SKIP = VAR ? FA_SM90_VAR_SKIP : FA_SM90_CAUSAL_SKIP;
    constexpr bool LEAD = VAR && FA_SM90_VAR_LEAD && C::BM > C::BN;     /* tiles.h */
    static_assert(!EXTRA || !VAR, "sinks, ALiBi: a plain kernel's EXTRA, or a variant kernel's own");
    extern __shared__ uint8_t smem_raw[];
    sm90_smem<C> &s = *reinterpret_cast<sm90_smem<C> *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);

    const fa_params &p = a.p;
    const int wg = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);   /* warp-uniform to the compiler */
    /* VAR: the whole problem (PACKED: each item's sequence, packed_item). */
    fa_var_seq seq{};
    if constexpr (VAR && !PACKED)
        seq = var_whole(a.var, p);
    /* PACKED: this thread's share of the check of cu_seqlens (var_seqlens_ok), voted on at the
     * barrier below; the items' ring past the struct. */
    bool seqlens_ok = true;
    if constexpr (PACKED)
        seqlens_ok = a.var.v.cu_seqlens_q == NULL || var_seqlens_ok(a.var, p, threadIdx.x, C::THREADS);
    sm90_packed_ring &ring = *reinterpret_cast<sm90_packed_ring *>(&s + 1);

    /* VAR with key_mask: each batch entry's key range (var_keys_rows), after the struct when the
     * launch gave it room (a.key_rows), scanned by every warp before the roles part. */
    const uint32_t keys = smem_u32(&s + 1);
    if constexpr (VAR) {
        if (a.key_rows) {                                   /* one tile per CTA: its own row only */
            const bool one = a.tile_stride >= a.n_items && !a.pairs;
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
        if constexpr (PACKED)
            for (int i = 0; i < 2; i++)
                mbar_init(&ring.full[i], 1), mbar_init(&ring.empty[i], 4 * C::CONSUMERS);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    /* Barrier: the mbarriers are initialised (and the key ranges in) before any thread (or TMA)
     * uses them; PACKED: and every thread's share of the cu_seqlens check is in. */
    if constexpr (PACKED) {
        /* The vote is the same in every thread; lane 0's, broadcast, is also warp-uniform to the
         * compiler. An exit it cannot prove uniform leaves the rest of the kernel divergent to it:
         * the ring's counters and every wgmma descriptor then live in per-thread registers, with an
         * R2UR before each wgmma (the d = 128 block loop: 983 instructions, against 933). */
        const bool all_ok = __shfl_sync(0xffffffffu, __syncthreads_and(seqlens_ok), 0);
        if (!all_ok) {                                      /* cu_seqlens break fa.h's rules */
            var_fill_nan<C::THREADS>(a.var, p, blockIdx.x, gridDim.x);
            return;
        }
    } else {
        __syncthreads();
    }

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
        /* PACKED: this CTA's place in the walk (x), the producer's cursor, the item, and the
         * counter's value fetched for the next one. */
        int x = (int)blockIdx.x;
        sm90_packed_cursor cur{0, -1, 0};
        int pk[8];
        int fetched = 0;
        auto next_item = [&]() -> int64_t {                 /* item it, it counted on */
            if constexpr (PACKED) {
                if (it > 0)
                    x = a.tile_counter != NULL ? (int)a.tile_stride + fetched : x + (int)a.tile_stride;
                packed_find<BM>(a, x, cur, pk);
                packed_put(ring, it, pk);
                return pk[0] < 0 ? a.n_items : 0;
            } else {
                return cta_tile(a, it);
            }
        };
        for (int64_t item = next_item(); item < a.n_items; ++it, item = next_item()) {
            fa_var_keys kr;
            fa_var_seq sq;                                  /* this item's sequence */
            const sm90_item w = any_item<C, SPLIT, VAR, PACKED>(a, item, pk, seq, keys, sq, kr);
            const int h = w.tp.h, hk = w.tp.hk, n_blocks = w.nb, kb0 = w.kb0;
            /* Packed: the sequence's rows, in tensor maps of one batch entry over all rows
             * (an unpacked call on the packed walk: its batch entry's, at rows 0). */
            const int b = PACKED && sq.packed ? 0 : w.tp.b;
            const int m0 = w.tp.m0 + (PACKED ? (int)sq.q0 : 0), k0 = PACKED ? (int)sq.k0 : 0;
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
            /* Block j's V into its stage (the consumers take block j's K and block j − 1's V at
             * the same step: V_LAG issues each V after the next block's K). */
            auto load_v = [&](int j) {
                const int st = (kc + j) % STAGES;
                mbar_wait(&s.empty_v[st], (((kc + j) / STAGES) & 1) ^ 1);
                mbar_expect_tx(&s.full_v[st], BN * D * 2);
#pragma unroll
                for (int pn = 0; pn < PANELS; pn++)
                    tma_load(s.v[st][pn], &a.tm_v, 64 * pn, k0 + (kb0 + j) * BN, hk, b, &s.full_v[st]);
            };
            for (int kb = 0; kb < n_blocks; kb++) {
                const int st = (kc + kb) % STAGES;
                const uint32_t parity = (((kc + kb) / STAGES) & 1) ^ 1;
                if constexpr (PACKED)                       /* the next item, as this one's last block goes */
                    if (a.tile_counter != NULL && kb == n_blocks - 1)
                        fetched = atomicAdd(a.tile_counter, 1);
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
                if (!V_LAG)
                    load_v(kb);
                else if (kb > 0)
                    load_v(kb - 1);
            }
            if (V_LAG && n_blocks > 0)
                load_v(n_blocks - 1);
            SM90_TRACE(it, 2);
            kc += n_blocks;
        }
        return;
    }

    /* Consumers: 64 query rows per warpgroup, O and the softmax state in registers. */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(C::CONSUMER_REGS));
    bool stored = false;                                    /* STORE_DEFER: the last item's O store */
    /* The rows and keys of every item but a packed one's, read here once (inside the loop the
     * plain kernels' SASS came out scheduled otherwise). */
    const int Nq0 = VAR ? seq.Nq : (int)p.Nq, Nk0 = VAR ? seq.Nk : (int)p.Nk;
    int pk[8], pk_next[8];                                  /* PACKED: this item and the next (packed_take) */
    auto next_item = [&]() -> int64_t {                     /* item it, it counted on */
        if constexpr (PACKED) {
            if (it == 0)
                packed_take(ring, 0, threadIdx.x % 32, pk_next);
            /* Shuffled again: a copy would merge values from the loop's joins, which the compiler
             * cannot prove warp-uniform (80-93 R2UR in the d = 128 and 256 block loops). */
#pragma unroll
            for (int i = 0; i < 8; i++)
                pk[i] = __shfl_sync(0xffffffffu, pk_next[i], 0);
            return pk[0] < 0 ? a.n_items : 0;
        } else {
            return cta_tile(a, it);
        }
    };
    for (int64_t item = next_item(); item < a.n_items; ++it, item = next_item()) {
        fa_var_keys kr;
        fa_var_seq sq;                                      /* this item's sequence */
        const sm90_item w = any_item<C, SPLIT, VAR, PACKED>(a, item, pk, seq, keys, sq, kr);
        const int Nq = PACKED ? sq.Nq : Nq0, Nk = PACKED ? sq.Nk : Nk0;
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
        /* Whether this is the CTA's last item (PACKED: known once the next is taken, take_next). */
        bool last_tile = !PACKED && cta_tile(a, it + 1) >= a.n_items;
        auto take_next = [&]() {
            if constexpr (PACKED) {
                packed_take(ring, it + 1, lane, pk_next);
                last_tile = pk_next[0] < 0;
            }
        };
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
                else
                    take_next();
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

        /* Causal: blocks starting past this warpgroup's last row are all masked for it (blocks at
         * the end only); it releases them untouched (ping-pong, CAUSAL_SKIP: taking their turns
         * empty). Block 0 shows key 0 to every row, so every m_i is finite after it. A causal plain
         * item is a whole tile (kb0 = 0: nothing causal splits). VAR (ping-pong, FA_SM90_VAR_SKIP):
         * the blocks past the last key its rows see (var_blocks over its rows); at least one.
         * LEAD as well: the lead blocks before the first key its rows see (a window's left edge),
         * each taken as an empty turn before its first block. It computes blocks lead..n_act − 1:
         * ring slots kc + lead.., keys from block kb0 + lead. */
        int lead = 0;
        const int n_act = [&]() -> int {
            if (!VAR && p.causal && (!pp || CAUSAL_SKIP))
                return min(n_blocks, (row_first + 63) / BN + 1);
            if constexpr (VAR && CAUSAL_SKIP != 0) {
                if (pp) {
                    int kw0, nbw;
                    var_blocks<BN>(a.var, sq, kr, row_first, min(row_first + 63, Nq - 1), kw0, nbw);
                    const int n = max(1, min(n_blocks, kw0 + nbw - kb0));
                    if constexpr (LEAD)
                        lead = min(max(kw0 - kb0, 0), n - 1);
                    return n;
                }
            }
            return n_blocks;
        }();
        const int kc1 = kc + lead, kb1 = kb0 + lead, n_run = n_act - lead;
        sm90_softmax_ctx ctx = {Nk, p.causal, row_first, row0, t, VAR ? 1.f : c};
        fa_var_rows y;                                      /* VAR: scores masked, in log2 units unless raw */
        float sink2 = 0.f;                                  /* VAR, SINK: the head's sink (log2 units), */
        if constexpr (SINK)                                 /* read here, not on the tile's last step */
            sink2 = __ldg(a.sinks + h) * FA_LOG2E;
        /* ALIBI: sl = slope / scale (c = scale · log2 e; sm90_dispatch_variants keeps scales below
         * 1e-6 off these kernels) within ±2^96, so that sl times any distance stays a float: where it
         * binds, every key but the row's own weighs 2^−(1.1e23 or more), 0 as it should. A slope
         * past fa.h's ±2.3e38, or NaN, makes the rows NaN, as on the variant kernel. near: each row's
         * offset for the block in flight (sm90_alibi_init); alibi_slope (unbounded) for lse; gentle:
         * |slope| ≤ 1, the one-sided blocks' terms one fma each (sm90_alibi_init). */
        float alibi_sl = 0.f, alibi_s2 = 0.f, alibi_slope = 0.f, alibi_near[2] = {0.f, 0.f},
              alibi_near_m[2] = {0.f, 0.f};
        bool alibi_gentle = false;
        if constexpr (ALIBI) {
            const float slope = __ldg(a.alibi + b * a.alibi_batch_stride + h);
            alibi_sl = fabsf(slope) <= 2.3e38f ? fmaxf(fminf(slope * FA_LOG2E / c, 0x1p96f), -0x1p96f) : NAN;
            alibi_s2 = alibi_sl * c;                        /* slope · log2 e, bounded alike */
            alibi_slope = alibi_sl == alibi_sl ? slope : NAN;
            alibi_gentle = fabsf(alibi_s2) <= FA_LOG2E;
        }

        if constexpr (VAR) {
            y = var_rows<var_mods(VAR)>(a.var, sq, kr, b, h, row_first, row_first + 63, row0, a.var.scale, true);
            if (a.var.v.sinks != NULL)
                sink2 = a.var.v.sinks[h] * FA_LOG2E;
            ctx.c = y.raw ? y.c : 1.f;
            /* attn_mask read per score: blocks 0, 1 into L2 */
            if constexpr ((var_mods(VAR) & FA_MOD_MASK) && !MSMEM && D >= 128)
                for (int kb = 0; kb < 2 && kb < n_run; kb++)
                    var_mask_prefetch<BN>((kb1 + kb) * BN, t, y);
        }

        /* The softmax of the block of keys key0.. in ring stage st, its variants applied first
         * (var_scores). FA_VAR_CAP at d = 256 on a block no mask reaches, a softcap alone: the tanh
         * inside the softmax (sm90_softmax's f), each score's beside its exponential (+4–5 % there;
         * at d = 64 and 128, −2 to −6 %: bench/LOG.md 2026-12-04-alibi). */
        auto block_softmax = [&](int key0, int st) {
            if constexpr (VAR == FA_VAR_CAP && D == 256) {
                if (y.cap && y.slope2 == 0.f && y.key_mask == NULL && key0 >= y.all_lo && key0 + BN <= y.all_hi) {
                    sm90_softmax<C, FA_VAR_CAP>(r_s, m_i, l_i, alpha, key0, ctx,
                                                [&](float x) { return var_tanh(x * y.cap_in); });
                    return;
                }
            }
            if constexpr (VAR) {
                var_scores<T, BN, var_mods(VAR), MSMEM ? BM * 128 : 0>(r_s, key0, t, y, m_row + st * M_STAGE);
                if (MSMEM)
                    release(&s.empty_k[st], lane);
            }
            if constexpr (ALIBI)
                sm90_softmax<C, FA_VAR_NONE, sm90_same, true>(r_s, m_i, l_i, alpha, key0, ctx, sm90_same(),
                                                              alibi_near, alibi_s2, alibi_near_m);
            else
                sm90_softmax<C, VAR>(r_s, m_i, l_i, alpha, key0, ctx);
        };

        /* LEAD: empty turns, as skipped_turns' below, but each always passed on: a lead block is
         * never a tile's last (skipped_turns' test there cost these kernels other SASS). */
        for (int kb = 0; kb < lead; kb++) {
            turn_wait(cw);
            turn_pass(next_cw);
            release_landed<C>(s, kc + kb, lane);
        }
        SM90_TRACE_NS(it, 6);
        SM90_TRACE(it, 0);
        mbar_wait(&s.full_q[qb], q_parity);
        SM90_TRACE(it, 1);
        /* Block 0: S_0 = Q K_0ᵀ, P_0. */
        {
            const int st = kc1 % STAGES;
            if constexpr (ALIBI)
                sm90_alibi_init<BN>(r_s, alibi_near, kb1 * BN, row0, t, alibi_sl, Nk, p.causal, alibi_gentle);
            mbar_wait(&s.full_k[st], (kc1 / STAGES) & 1);
            if (pp)
                turn_wait(cw);
            issue_qk<T, C, ALIBI>(r_s, s_q, smem_u32(s.k[st]));
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
        block_softmax(kb1 * BN, kc1 % STAGES);
        pack_frags<T, BN>(r_p, r_s);
        SM90_TRACE(it, 2);
        /* Block kb: S_kb = Q K_kbᵀ and O += P_(kb−1) V_(kb−1) are issued together; the softmax of
         * S_kb waits only for the first, so it overlaps the second, and O is rescaled by S_kb's alpha
         * once the second has completed (RESCALE_EARLY: after S_(kb+1) is issued, before the P V
         * that follows; block 0's alpha would scale zeros). The last block's P V follows the loop. */
        SM90_TRACE_VAR(tr_kv);
        SM90_TRACE_VAR(tr_turn);
        SM90_TRACE_VAR(tr_qk);
        SM90_TRACE_VAR(tr_pv);
        SM90_TRACE_VAR(tr_issue);
        SM90_TRACE_VAR(tr_sm);
        for (int kb = 1; kb < n_run; kb++) {
            const int st = (kc1 + kb) % STAGES, pst = (kc1 + kb - 1) % STAGES;
            if constexpr (ALIBI)                            /* r_s is free: P is in r_p; near: block kb's */
                sm90_alibi_init<BN>(r_s, alibi_near, (kb1 + kb) * BN, row0, t, alibi_sl, Nk, p.causal,
                                    alibi_gentle);
            SM90_TIMED(tr_kv, mbar_wait(&s.full_k[st], ((kc1 + kb) / STAGES) & 1);
                              mbar_wait(&s.full_v[pst], ((kc1 + kb - 1) / STAGES) & 1));
            if (pp)
                SM90_TIMED(tr_turn, turn_wait(cw));
            SM90_TIMED(tr_issue, issue_qk<T, C, ALIBI>(r_s, s_q, smem_u32(s.k[st]));
                                 if (RESCALE_EARLY && kb > 1) rescale<C>(r_o, alpha);
                                 issue_pv<T, C>(r_o, r_p, smem_u32(s.v[pst]));
                                 if (pp) turn_pass(next_cw));
            if constexpr ((var_mods(VAR) & FA_MOD_MASK) && !MSMEM && D >= 128) /* the next mask block */
                if (kb + 1 < n_run)
                    var_mask_prefetch<BN>((kb1 + kb + 1) * BN, t, y);
            SM90_TIMED(tr_qk, wgmma_wait<1>());             /* S_kb is ready, P V may still run */
            SM90_TIMED(tr_sm, reg_fence(r_s);
                              if (!MSMEM) release(&s.empty_k[st], lane);
                              block_softmax((kb1 + kb) * BN, st);
                              softmax_done<C>(l_i));
            SM90_TIMED(tr_pv, wgmma_wait<0>());             /* O += P_(kb−1) V_(kb−1) is done */
            reg_fence(r_o);
            reg_fence_u(r_p);
            release(&s.empty_v[pst], lane);
            if (!RESCALE_EARLY)
                rescale<C>(r_o, alpha);
            pack_frags<T, BN>(r_p, r_s);
        }
        SM90_TRACE(it, 3);
        SM90_TRACE_PUT4(it, tr_kv, tr_turn, tr_qk, tr_pv);
        SM90_TRACE_PUT2(it, tr_issue, tr_sm);
        if (pp)                                             /* last_tile, for the last turn below */
            take_next();
        {
            const int st = (kc1 + n_run - 1) % STAGES;
            mbar_wait(&s.full_v[st], ((kc1 + n_run - 1) / STAGES) & 1);
            if (pp)
                turn_wait(cw);
            if (RESCALE_EARLY && n_run > 1)
                rescale<C>(r_o, alpha);
            issue_pv<T, C>(r_o, r_p, smem_u32(s.v[st]));
            if (pp && (cw != C::CONSUMERS - 1 || !last_tile || n_act < n_blocks))
                turn_pass(next_cw);
            wgmma_wait<0>();
            reg_fence(r_o);
            reg_fence_u(r_p);
            release(&s.empty_v[st], lane);
        }
        /* Blocks all masked for this warpgroup: released once they have landed (ping-pong: each
         * with an empty turn, here or after the epilogue, skipped_turns). */
        auto skipped_turns = [&](int kc0) {
            for (int kb = n_act; kb < n_blocks; kb++) {
                turn_wait(cw);
                if (kb + 1 < n_blocks || cw != C::CONSUMERS - 1 || !last_tile)
                    turn_pass(next_cw);
                release_landed<C>(s, kc0 + kb, lane);
            }
        };
        if (!pp || CAUSAL_SKIP == 1) {
            if (pp)
                skipped_turns(kc);
            else
                for (int kb = n_act; kb < n_blocks; kb++)
                    release_landed<C>(s, kc + kb, lane);
        }
        if (!pp)
            take_next();
        kc += n_blocks;
        SM90_TRACE(it, 4);

        /* l = rowsum over the quad (> 0: each row's max term is exp2(~0)); O /= l; lse. VAR or SINK:
         * a sink joins the denominator; VAR: a row that saw no key (l = 0) gets O = 0 (fa_row_end). */
        float inv_l[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float l = l_i[r];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            float lse2 = 0.f;
            if constexpr (VAR) {
                fa_row_end(m_i[r] * ctx.c, l, a.var.v.sinks != NULL, sink2, &inv_l[r], &lse2);
            } else if (SINK && !(SPLIT && w.j >= 0)) {     /* a part's sink: in the merge */
                /* Every row of a SINK tile sees a key, its max term exp2(0) (sm90_softmax), so l is
                 * at least about 1 or NaN; l = 0 would read in fa_row_end as a row that sees nothing
                 * (0, lse = the sink): NaN instead, as the plain kernel's. */
                fa_row_end(m_i[r] * c, l == 0.f ? NAN : l, 1, sink2, &inv_l[r], &lse2);
            } else {
                inv_l[r] = 1.f / l;
            }
            const int row = row0 + 8 * r;
            if (SPLIT && w.j >= 0 && t == 0)                /* a part: lse_part (tail item, BM); */
                a.lse_part[w.j * BM + row - m0] =           /* SINK: l = 0, NaN (as above) */
                    SINK && l == 0.f ? NAN
                    : (ALIBI ? fmaf(-alibi_slope * FA_LOG2E, alibi_near_m[r], m_i[r]) : m_i[r] * c) + log2f(l);
            else if (p.lse && t == 0 && row < Nq)           /* lse: (B, Hq, Nq); packed (Hq, total_q); */
                p.lse[PACKED && sq.packed ? h * sq.total_q + sq.q0 + row : bh * p.Nq + row] =   /* ALiBi's term: one */
                    VAR || SINK ? lse2 * FA_LN2                                      /* rounding, in nats */
                    : ALIBI     ? fmaf(-alibi_slope, alibi_near_m[r], fa_lse(m_i[r], l))
                                : fa_lse(m_i[r] * c, l);
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
        if (PACKED && sq.packed && row_first + 64 > Nq) {   /* packed: rows past Nq are another sequence's */
            var_store_rows<D, BM>(p, s_q, sq, h, row_first);
            warpgroup_bar(1 + cw);                          /* every thread has read its rows of Q's buffer */
            if (threadIdx.x % 128 == 0)
                mbar_arrive(&s.empty_q[qb]);
            if (pp && CAUSAL_SKIP == 2)
                skipped_turns(kc - n_blocks);
            SM90_TRACE(it, 5);
            continue;
        }
        if (threadIdx.x % 128 == 0) {
#pragma unroll
            for (int pn = 0; pn < PANELS; pn++)
                tma_store(&a.tm_o, &s.q[qb][pn][64 * cw][0], 64 * pn, (PACKED ? (int)sq.q0 : 0) + row_first, h,
                          PACKED && sq.packed ? 0 : b);
            asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
            /* Shared memory must outlive the store's reads of it; then the producer may refill it
             * (STORE_DEFER: after the next item's first Q Kᵀ is issued, or below). */
            if (!STORE_DEFER || last_tile) {
                asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
                mbar_arrive(&s.empty_q[qb]);
            }
        }
        stored = true;
        if (pp && CAUSAL_SKIP == 2)                         /* (a skipping item never splits: plain */
            skipped_turns(kc - n_blocks);                   /* ones are causal, VAR ones are whole) */
        SM90_TRACE(it, 5);
    }
#endif /* FA_SM90_DEVICE */
}

/* ---- The merge ----------------------------------------------------------------------------- */

/* The split tiles' parts merged, one warp per row of a tail tile, MERGE_ROWS rows per CTA (grid
 * n_split / parts · BM / MERGE_ROWS): O = Σ_q w_q O_q / Σ_q w_q, w_q = exp2(lse_q − M),
 * M = max_q lse_q; lse = M + log2 Σ_q w_q. Every part reads at least one key (non-causal), so each
 * lse_q is finite for finite inputs. SINK: the head's sink s2 (log2 units) joins the denominator,
 * M = max(M, s2), Σ_q w_q + exp2(s2 − M) (a sink of −inf adds nothing). */
#define MERGE_ROWS 4
template <typename T, class C, int EXTRA = 0>
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
    constexpr bool SINK = EXTRA & SM90_SINK;
    float s2 = -INFINITY;
    if constexpr (SINK) {
        s2 = __ldg(a.sinks + tp.h) * FA_LOG2E;
        M = fmaxf(M, s2);
    }
    float wt[MAX_PARTS], l = SINK && s2 != -INFINITY ? exp2f(s2 - M) : 0.f;
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

#endif /* FA_SM90_KERNEL_CUH */
