/*
 * decode_attend.cuh — the split-KV attend kernel on tensor cores (fp16, bf16; step 2a of decode.cu,
 * which includes it and describes the algorithm): its shared memory, the per-warp key loop over a
 * private cp.async ring, the variants' per-score steps, the warps' merge and the cluster merge of the
 * splits. Needs the headers decode.cu includes before it.
 */
#ifndef FA_DECODE_ATTEND_CUH
#define FA_DECODE_ATTEND_CUH

/* ---- 2a. Attend on tensor cores (fp16, bf16) ------------------------------------------------ */

/* Shared memory of one CTA. K/V tiles: element (r, c) in 16-byte chunk (c/8) ^ (r%8). After its
 * key loop a warp reuses its ring for its unnormalised (m, l, O), which the CTA then merges. */
template <class C>
struct decode_smem {
    uint16_t q[16][C::D];                            /* the 16 packed query rows, zero-padded */
    union __align__(16) {
        struct {
            uint16_t k[C::STAGES][16][C::D];         /* key block i of this warp: stage i % STAGES */
            uint16_t v[C::STAGES][16][C::D];
        } ring;
        struct {
            float o[16][C::D + 8];                   /* +8: float2 stores of a C fragment hit 32 banks */
            float m[16], l[16];                      /* log2 units; l summed over the whole row */
        } part;
    } w[C::WARPS];
    float wt[C::WARPS][16];                          /* warp merge: warp w's weight for row r */
    float lse_cta[16];                               /* this CTA's lse per row, log2 */
};

/* Copies rows 0..15 (rows >= rows zero-filled) and columns 0..d-1 (the rest zero) of a global
 * (·, d) tile into a swizzled shared tile, by the 32 lanes of one warp. vec: 16-byte aligned rows,
 * cp.async (the caller commits); else 2-byte loads stored at once. The key loop's blocks of 16
 * whole rows take a shorter path of their own (load_next in fa_decode_attend_kernel). */
template <int D>
__device__ __forceinline__ void load_rows16(uint32_t s_tile, const uint16_t *g, int64_t row_stride, int rows,
                                            int d, int vec, int lane)
{
    constexpr int CHUNKS = D / 8, STEP = 32 / CHUNKS;   /* STEP rows per pass of the warp */
    const int c = lane % CHUNKS;
    const int nc = max(0, min(8, d - 8 * c));           /* valid elements of this lane's chunk */
#pragma unroll
    for (int it = 0; it < 16 / STEP; it++) {
        const int r = lane / CHUNKS + it * STEP;
        const int n = r < rows ? nc : 0;
        const uint16_t *src = n ? g + r * row_stride + 8 * c : g;
        if (vec) {
            cp_async16(s_tile + swz<D>(r, c), src, 2 * n);
        } else {
            st_shared_v4(s_tile + swz<D>(r, c), load_chunk8(src, n));
        }
    }
}

/* The splits of one row tile, a cluster, each holding its (O / l, lse) in shared memory
 * (w[0].part.o, lse_cta): the cluster's threads share out the tile's (row, column) elements and
 * merge them as the combine kernel does, O = Σ_s 2^(lse_s − M) O_s / Σ_s 2^(lse_s − M); a split
 * that saw no key has lse −inf and weight 0. A split's lse is NaN where it met a NaN score, or in
 * every split where cache_seqlens is bad: the row is then NaN (fmaxf would drop a NaN from M).
 * Every thread of every CTA calls it. */
template <typename T, class C, bool VAR>
__device__ __forceinline__ void cluster_merge(const decode_args &a, decode_smem<C> &s, int64_t b, int64_t hk,
                                              int r0)
{
    constexpr int D = C::D;
    const fa_params &p = a.kp.p;
    const int splits = (int)a.splits, d = (int)p.d, G = a.G, R = a.R, Nq = (int)p.Nq;
    /* Cluster barrier: every CTA's results are in its shared memory. */
    cluster_sync();
    const int nrows = min(16, R - r0);
    for (int idx = cluster_rank() * C::THREADS + threadIdx.x; idx < nrows * D; idx += splits * C::THREADS) {
        const int r = idx / D, col = idx % D, row = r0 + r;
        if (col >= d)
            continue;
        /* All 2 · splits remote loads in flight at once (a loop that used each value before the
         * next load waited out the cluster's latency 3 · splits times). */
        float lse_s[MAX_CLUSTER], o_s[MAX_CLUSTER];
#pragma unroll
        for (int sp = 0; sp < MAX_CLUSTER; sp++)
            if (sp < splits) {
                lse_s[sp] = ld_cluster_f32(&s.lse_cta[r], sp);
                o_s[sp] = ld_cluster_f32(&s.w[0].part.o[r][col], sp);
            }
        float M = -INFINITY;
        bool nan_lse = false;
#pragma unroll
        for (int sp = 0; sp < MAX_CLUSTER; sp++)
            if (sp < splits) {
                M = fmaxf(M, lse_s[sp]);
                nan_lse |= isnan(lse_s[sp]);
            }
        const bool valid = !nan_lse;
        float l = 0.f, o = 0.f;
        if (M != -INFINITY)
#pragma unroll
            for (int sp = 0; sp < MAX_CLUSTER; sp++)
                if (sp < splits) {
                    const float w = ex2(lse_s[sp] - M);
                    l += w;
                    o += w * o_s[sp];
                }
        const int64_t h = hk * G + row % G, i = row / G;
        if (VAR && a.v.sinks != NULL) {                 /* the sink joins the denominator */
            float mul, lse2;
            fa_row_end(M, l, 1, a.v.sinks[h] * FA_LOG2E, &mul, &lse2);
            from_float((T *)p.o + b * p.o_batch_stride + h * p.o_head_stride + i * p.o_row_stride + col,
                       valid ? o * mul : NAN);
            if (col == 0 && p.lse != NULL)
                p.lse[(b * p.Hq + h) * Nq + i] = valid ? lse2 * FA_LN2 : NAN;
            continue;
        }
        from_float((T *)p.o + b * p.o_batch_stride + h * p.o_head_stride + i * p.o_row_stride + col,
                   valid ? (l == 0.f ? 0.f : o / l) : NAN);
        if (col == 0 && p.lse != NULL)
            p.lse[(b * p.Hq + h) * Nq + i] = fa_split_lse(M, l, valid);
    }
    /* Cluster barrier: no CTA leaves (and frees its shared memory) while another may read it. */
    cluster_sync();
}

/* Grid: 1-D over (row tile, split, b·Hkv + hk), row tile fastest so that the tiles reading the
 * same keys run together and share them in L2; clustered, over (split, row tile, b·Hkv + hk);
 * block: C::WARPS warps. */
template <typename T, class C, bool VAR = false>
__global__ void __launch_bounds__(C::THREADS, C::MIN_CTAS)
fa_decode_attend_kernel(const __grid_constant__ decode_args a)
{
    constexpr int D = C::D, STAGES = C::STAGES, WARPS = C::WARPS, CHUNKS = D / 8;
    extern __shared__ __align__(128) uint8_t smem_raw[];
    decode_smem<C> &s = *reinterpret_cast<decode_smem<C> *>(smem_raw);

#ifdef FA_DECODE_TRACE
    const uint64_t gt0 = trace_gt();
#endif
    TRACE_CLK(c0);
    const fa_params &p = a.kp.p;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane / 4, t = lane % 4;               /* fragment row group, column pair */
    const int d = (int)p.d, Nq = (int)p.Nq, G = a.G, R = a.R;
    const float c = a.scale_log2;

    /* Clustered: split fastest, so that a cluster holds every split of one row tile. */
    const int64_t blk = blockIdx.x;
    const int64_t tile = a.cluster ? blk / a.splits : blk % a.row_tiles + blk / a.row_tiles / a.splits * a.row_tiles;
    const int r0 = (int)(tile % a.row_tiles) * 16;      /* first packed row of the tile */
    const int64_t split = a.cluster ? blk % a.splits : blk / a.row_tiles % a.splits, bh = tile / a.row_tiles;
    const int64_t b = bh / p.Hkv, hk = bh % p.Hkv;
    /* This CTA reads keys [k0, k1) of its sequence (k1 is known once cache_seqlens is read below);
     * k_spec: the end of its chunk in the cache, the most it can read. */
    /* VAR, win_base: the splits divide the window of the tile's first row (query r0 / G), whose
     * first key needs L_b: read here, at once (nothing is loaded before it then), and clamped into
     * the cache (a bad entry makes the output NaN below). */
    int64_t base = 0;
    if (VAR && a.win_base) {
        const int64_t L0 = min(max(seq_start(a, b) + a.nnew, (int64_t)0), p.Nk);
        base = max((int64_t)0, min(L0, r0 / G + L0 - p.Nq - a.var_left));
    }
    const int64_t k0_64 = base + split * a.chunk;
    const int k0 = (int)(VAR ? min(k0_64, p.Nk) : k0_64), k_spec = (int)min(p.Nk, k0_64 + a.chunk);

    /* g_k, g_v: k[b, hk], v[b, hk] (Nmax, d). */
    const uint16_t *g_k = (const uint16_t *)p.k + b * p.k_batch_stride + hk * p.k_head_stride;
    const uint16_t *g_v = (const uint16_t *)p.v + b * p.v_batch_stride + hk * p.v_head_stride;
    uint32_t s_k0 = smem_u32(s.w[warp].ring.k), s_v0 = smem_u32(s.w[warp].ring.v);
    keep_in_register(s_k0);
    keep_in_register(s_v0);
    constexpr uint32_t STAGE_BYTES = 16 * D * 2, RING_BYTES = STAGES * STAGE_BYTES;

    /* The warp's blocks are loaded in order, one per call of load_next, from a cursor that moves
     * by one block of the warp per call: its first key, its stage's offset in the ring, and this
     * lane's first 16-byte chunk of K and V (row lr, chunk lc), so that a whole block of exactly D
     * columns (every block but the last at d = 64, 128, 256) costs one pointer step per chunk. */
    constexpr int STEP = 32 / CHUNKS, NSW = 8 / STEP;   /* rows per pass of the warp; passes per 8 rows */
    const int lr = lane / CHUNKS, lc = lane % CHUNKS;
    /* The lane's chunk in rows lr + j·STEP of a stage (j < NSW); 8 rows further adds 8 rows' bytes. */
    uint32_t sw[NSW];
#pragma unroll
    for (int j = 0; j < NSW; j++) {
        sw[j] = swz<D>(lr + j * STEP, lc);
        keep_in_register(sw[j]);
    }
    const bool whole_rows = a.vec_kv && d == D;
    uint64_t evict_first_pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(evict_first_pol));
    /* Local block i of this warp: block run·(warp + WARPS·(i / run)) + i % run of the chunk. From
     * one block to the next the cursor moves 16 keys inside a run, `jump` keys at a run's end. */
    constexpr int run = DECODE_RUN, jump = 16 * (run * (WARPS - 1) + 1);
    auto block_key = [&](int i) { return k0 + 16 * (run * (warp + WARPS * (i / run)) + i % run); };
    int ld_key0 = k0 + 16 * run * warp, ld_left = run;  /* ld_left: blocks left in the run */
    uint32_t ld_off = 0;
    const uint16_t *ld_k = g_k + (int64_t)(ld_key0 + lr) * p.k_row_stride + 8 * lc;
    const uint16_t *ld_v = g_v + (int64_t)(ld_key0 + lr) * p.v_row_stride + 8 * lc;
    const int64_t k_step = STEP * p.k_row_stride, v_step = STEP * p.v_row_stride;
    const int64_t k_in = 16 * p.k_row_stride, v_in = 16 * p.v_row_stride;
    const int64_t k_jump = jump * p.k_row_stride, v_jump = jump * p.v_row_stride;
    /* Loads the warp's next block, rows from kend on zero-filled. */
    auto load_next = [&](int kend) {
        if (whole_rows && kend - ld_key0 >= 16) {
            const uint16_t *src_k = ld_k, *src_v = ld_v;
            const uint32_t st_k = s_k0 + ld_off, st_v = s_v0 + ld_off;
            /* Two loops, not a policy chosen per copy: an evict_normal policy in place of no
             * hint made the copies slow (H200: B = 1 H 32/32 32k 3.8 → 3.5 TB/s). */
            if (a.evict_first) {
#pragma unroll
                for (int it = 0; it < 16 / STEP; it++, src_k += k_step, src_v += v_step) {
                    const uint32_t off = sw[it % NSW] + it / NSW * 8 * D * 2;
                    cp_async16_hint(st_k + off, src_k, evict_first_pol);
                    cp_async16_hint(st_v + off, src_v, evict_first_pol);
                }
            } else {
#pragma unroll
                for (int it = 0; it < 16 / STEP; it++, src_k += k_step, src_v += v_step) {
                    const uint32_t off = sw[it % NSW] + it / NSW * 8 * D * 2;
                    cp_async16_full(st_k + off, src_k);
                    cp_async16_full(st_v + off, src_v);
                }
            }
        } else {
            load_rows16<D>(s_k0 + ld_off, g_k + (int64_t)ld_key0 * p.k_row_stride, p.k_row_stride,
                           kend - ld_key0, d, a.vec_kv, lane);
            load_rows16<D>(s_v0 + ld_off, g_v + (int64_t)ld_key0 * p.v_row_stride, p.v_row_stride,
                           kend - ld_key0, d, a.vec_kv, lane);
        }
        const bool end = --ld_left == 0;
        ld_left = end ? run : ld_left;
        ld_key0 += end ? jump : 16;
        ld_k += end ? k_jump : k_in;
        ld_v += end ? v_jump : v_in;
        ld_off = ld_off + STAGE_BYTES == RING_BYTES ? 0 : ld_off + STAGE_BYTES;
    };

    /* Q tile first, into registers: row r of the tile is q[b, hk·G + (r0+r) % G, (r0+r) / G];
     * rows past R and columns past d are zero. Issued before the K/V prologue so that these
     * loads do not queue behind it (H200, loaded after it: Q in shared memory 4-6 µs after the
     * CTA started; bench/LOG.md, 2026-11-30), and before cache_seqlens is read. */
    constexpr int Q_CHUNKS = 16 * CHUNKS / C::THREADS;
    static_assert(16 * CHUNKS % C::THREADS == 0, "Q chunks per thread");
    uint4 r_qld[Q_CHUNKS];
#pragma unroll
    for (int j = 0; j < Q_CHUNKS; j++) {
        const int idx = threadIdx.x + j * C::THREADS;
        const int r = idx / CHUNKS, ch = idx % CHUNKS, row = r0 + r;
        const int n = row < R ? max(0, min(8, d - 8 * ch)) : 0;
        r_qld[j] = make_uint4(0, 0, 0, 0);
        if (n > 0) {
            const uint16_t *src = (const uint16_t *)p.q + b * p.q_batch_stride
                                + (hk * G + row % G) * p.q_head_stride + (int64_t)(row / G) * p.q_row_stride
                                + 8 * ch;
            r_qld[j] = a.vec_q && n == 8 ? *(const uint4 *)src : load_chunk8(src, n);
        }
    }

    /* Prologue: blocks 0 .. STAGES−2 of this warp, one cp.async group each (possibly empty).
     * Issued before cache_seqlens is read (a memory latency saved at the start of every CTA), of
     * the whole blocks below k_spec: every row there lies inside the cache. */
    const bool spec = whole_rows;
#pragma unroll
    for (int i = 0; i < STAGES - 1; i++) {
        if (spec && block_key(i) + 16 <= k_spec)
            load_next(k_spec);
        cp_async_commit();
    }

    /* VAR with key_mask (attention calls on this kernel, fa_decode_attention_cuda): key_mask[b, ·]
     * read a run of DECODE_RUN blocks (64 keys) ahead, lane l its keys 2l and 2l + 1 (km0, km1; keys
     * past Nk read as 0, and lim masks them anyway), so that the loads' latency hides behind a whole
     * run. At a run's first block two ballots make its 64 bits: key 16j + 8n + 2t + e of its block j
     * is bit 8j + 4n + t of ballot e. The first run's keys are requested here, before the barrier. */
    static_assert(DECODE_RUN * 16 == 64, "a run's keys are the 64 bits of two ballots");
    const uint8_t *g_km = VAR && a.v.key_mask != NULL ? a.v.key_mask + b * a.v.key_mask_batch_stride : NULL;
    uint32_t km0 = 1, km1 = 1;
    auto load_run_mask = [&](int key_first) {
        const int key = key_first + 2 * lane;
        km0 = key < p.Nk ? __ldg(g_km + key) : 0;
        km1 = key + 1 < p.Nk ? __ldg(g_km + key + 1) : 0;
    };
    if (VAR && g_km != NULL)
        load_run_mask(k0 + 16 * run * warp);
    uint32_t run_m0 = ~0u, run_m1 = ~0u;               /* the current run's bits */

    const bool valid = seqlens_valid(a);
    const int L = valid ? (int)(seq_start(a, b) + a.nnew) : 0;
    /* Packed row r (query i = r / G) sees keys j < lim(r) = L, or L − Nq + i + 1 when causal. The
     * tile's last real row sees the most; k1 = min(its end, k_spec). */
    const int i_last = (min(R, r0 + 16) - 1) / G;
    int kv_end = p.causal ? L - Nq + i_last + 1 : L;
    /* VAR: the window about δ = L − Nq (causal folded in as right = 0): keys [lo, hi) of query i are
     * [i + δ − left, i + δ + right + 1) ∩ [0, L). The tile's last row sees the last keys, its first
     * row the first: a chunk below that is skipped whole. */
    auto var_lo = [&](int i) {
        return a.var_left >= 0 ? (int)max((int64_t)0, min((int64_t)L, (int64_t)i + L - Nq - a.var_left)) : 0;
    };
    auto var_hi = [&](int i) {
        return a.var_right >= 0 ? (int)max((int64_t)0, min((int64_t)L, (int64_t)i + L - Nq + a.var_right + 1)) : L;
    };
    if (VAR)
        kv_end = var_lo(r0 / G) >= k_spec ? k0 : var_hi(i_last);
    const int k1 = min(kv_end, k_spec);
    const int n_blocks = k1 > k0 ? (k1 - k0 + 15) / 16 : 0;
    const int nb_w = n_blocks / (run * WARPS) * run                       /* this warp's */
                   + min(run, max(0, n_blocks % (run * WARPS) - run * warp));

    /* The blocks read ahead are the loop's first blocks if the last of them it uses is whole below
     * k1 (blocks it does not use are never read from the ring). Else (no read-ahead, or a block
     * holding rows past k1, which may hold anything, NaN included, and must be zeros) the
     * prologue again, after the copies in flight have landed. */
    const int n_pro = min(nb_w, STAGES - 1);
    if (!spec || (n_pro > 0 && block_key(n_pro - 1) + 16 > k1)) {
        cp_async_wait<0>();
        /* Warp barrier: every lane's copies have landed before any lane's below land there. */
        __syncwarp();
        ld_key0 = k0 + 16 * run * warp;
        ld_left = run;
        ld_off = 0;
        ld_k = g_k + (int64_t)(ld_key0 + lr) * p.k_row_stride + 8 * lc;
        ld_v = g_v + (int64_t)(ld_key0 + lr) * p.v_row_stride + 8 * lc;
#pragma unroll
        for (int i = 0; i < STAGES - 1; i++) {
            if (i < nb_w)
                load_next(k1);
            cp_async_commit();
        }
    }

    /* Q tile into shared memory from the registers loaded before the prologue. */
#pragma unroll
    for (int j = 0; j < Q_CHUNKS; j++) {
        const int idx = threadIdx.x + j * C::THREADS;
        st_shared_v4(smem_u32(s.q) + swz<D>(idx / CHUNKS, idx % CHUNKS), r_qld[j]);
    }
    /* Barrier: the Q tile is visible to every warp. */
    __syncthreads();
    TRACE_CLK(c1);

    /* Keys this lane's rows g and g + 8 see (padded rows: L, harmless as their Q is zero). */
    int lim_a = p.causal && r0 + g < R ? L - Nq + (r0 + g) / G + 1 : L;
    int lim_b = p.causal && r0 + g + 8 < R ? L - Nq + (r0 + g + 8) / G + 1 : L;
    /* VAR: each row's first key too (the window), its query's position i + δ less this lane's
     * first column 2t for ALiBi, and its head's slope (log2 units; 0: none). */
    int lo_a = 0, lo_b = 0, rd_a = 0, rd_b = 0;
    float slope_a = 0.f, slope_b = 0.f;
    if constexpr (VAR) {
        const int ia = (r0 + g) / G, ib = (r0 + g + 8) / G;
        lo_a = var_lo(ia), lo_b = var_lo(ib);
        lim_a = var_hi(ia), lim_b = var_hi(ib);
        rd_a = L - Nq + ia - 2 * t, rd_b = L - Nq + ib - 2 * t;
        slope_a = fa_alibi_slope2(&a.v, b, hk * G + (r0 + g) % G);
        slope_b = fa_alibi_slope2(&a.v, b, hk * G + (r0 + g + 8) % G);
    }
    const int lim_lo = min(lim_a, lim_b), lo_hi = max(lo_a, lo_b);

    /* ldmatrix.x4 lane addresses as in sm80.cu: Q and V rows lane%16, chunk lane/16; K rows
     * lane%8 + 8·(lane/16), chunk (lane/8)%2, so each MMA's B pair is two adjacent registers. */
    const uint32_t lane_off = swz<D>(lane % 16, lane / 16);
    const uint32_t lane_off_k = swz<D>(lane % 8 + 8 * (lane / 16), (lane / 8) % 2);
    const uint32_t s_q = smem_u32(s.q);

    /* Q's A fragments: up to D = 128 loaded once, D/4 registers (the key loop then reads only K
     * and V from shared memory); at D = 256 they would not fit beside O, so one at a time. */
    constexpr bool Q_REGS = D <= 128;
    uint32_t r_q[Q_REGS ? D / 16 : 1][4];
#pragma unroll
    for (int kk = 0; kk < (Q_REGS ? D / 16 : 0); kk++)
        ldsm_x4(r_q[kk], frag_addr<D>(s_q, lane_off, 0, 2 * kk));

    float r_o[D / 8][4] = {};                           /* O: 16 × D, C layout */
    float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.f, 0.f};   /* rows g, g+8; l_i: own columns */

    uint32_t cs_off = 0;                                /* block i's stage: (i % STAGES) · STAGE_BYTES */
    int key0 = k0 + 16 * run * warp, cs_left = run;     /* block i's first key; blocks left in its run */
#ifdef FA_DECODE_TRACE
    long long c2 = 0;
#endif
    for (int i = 0; i < nb_w; i++) {
        /* After block i, the groups of blocks i+1 .. i+STAGES−2 may still be in flight. */
        cp_async_wait<STAGES - 2>();
        /* Warp barrier: every lane's copies of block i are visible, and every lane has finished
         * block i−1, whose stage the load below overwrites. */
        __syncwarp();
#ifdef FA_DECODE_TRACE
        if (i == 0)
            c2 = clock64();
#endif
        if (i + STAGES - 1 < nb_w)
            load_next(k1);                              /* block i + STAGES − 1 */
        cp_async_commit();                              /* possibly empty: keeps the count */
        /* VAR, key_mask: this lane's bits of block i (bit 2n + e: key 8n + 2t + e takes part). */
        uint32_t km = 0xfu;
        if (VAR && g_km != NULL) {
            if (cs_left == run) {                       /* a run's first block: its 64 bits */
                run_m0 = __ballot_sync(0xffffffffu, km0 != 0);
                run_m1 = __ballot_sync(0xffffffffu, km1 != 0);
                if (i + run < nb_w)
                    load_run_mask(key0 + 16 * run * WARPS);   /* this warp's next run */
            }
            const int sh = 8 * (run - cs_left) + t;
            km = (run_m0 >> sh & 1u) | (run_m1 >> sh & 1u) << 1 | (run_m0 >> (sh + 4) & 1u) << 2
               | (run_m1 >> (sh + 4) & 1u) << 3;
        }

        const uint32_t s_k = s_k0 + cs_off, s_v = s_v0 + cs_off;
        cs_off = cs_off + STAGE_BYTES == RING_BYTES ? 0 : cs_off + STAGE_BYTES;

        /* S = Q Kᵀ: 16 rows × 16 keys; n-tile 0 keys 0-7, n-tile 1 keys 8-15. */
        float r_s[2][4] = {};
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            uint32_t r_k[4];
            const int qf = Q_REGS ? kk : 0;
            if (!Q_REGS)
                ldsm_x4(r_q[0], frag_addr<D>(s_q, lane_off, 0, 2 * kk));
            ldsm_x4(r_k, frag_addr<D>(s_k, lane_off_k, 0, 2 * kk));
            mma16816<T>(r_s[0], r_q[qf], r_k[0], r_k[1]);
            mma16816<T>(r_s[1], r_q[qf], r_k[2], r_k[3]);
        }

        /* s = S · c; −inf for keys a row does not see (only blocks at the end pay for the test).
         * VAR, in fa.h's order: softcap, ALiBi, the window's first keys too. */
        if (VAR && a.cap_c != 0.f) {
#pragma unroll
            for (int n = 0; n < 2; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    r_s[n][e] = a.cap_c * var_tanh(r_s[n][e] * a.cap_in);
        } else {
#pragma unroll
            for (int n = 0; n < 2; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    r_s[n][e] *= c;
        }
        if (VAR && (slope_a != 0.f || slope_b != 0.f)) {     /* s −= slope · |i + δ − j| */
            /* i + δ − j = (rd − key0) − (8n + e%2): the first term formed in int (a block the loop
             * reads has key0 < L, so it lies in [−Nq − 5, L + 15)) and converted once per row and
             * block, so that the near keys' distances stay exact at any cache length (positions
             * converted to float before the subtraction round past 2²⁴). */
            const float da = (float)(rd_a - key0), db = (float)(rd_b - key0);
#pragma unroll
            for (int n = 0; n < 2; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    r_s[n][e] -= (e < 2 ? slope_a : slope_b) * fabsf((e < 2 ? da : db) - (float)(8 * n + e % 2));
        }
        if (key0 + 16 > lim_lo || (VAR && (key0 < lo_hi || km != 0xfu))) {
#pragma unroll
            for (int n = 0; n < 2; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = key0 + 8 * n + 2 * t + e % 2;
                    if (key >= (e < 2 ? lim_a : lim_b)
                        || (VAR && (key < (e < 2 ? lo_a : lo_b) || !(km >> (2 * n + e % 2) & 1u))))
                        r_s[n][e] = -INFINITY;
                }
        }

        /* m_new = max(m_i, rowmax(s)), over the 4 lanes of a quad. A row that has seen only −inf
         * so far uses 0 as its reference, so no exp2 sees −inf − (−inf). */
        float m_ref[2], alpha[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float x = fmaxf(m_i[r], fmaxf(fmaxf(r_s[0][2 * r], r_s[0][2 * r + 1]),
                                          fmaxf(r_s[1][2 * r], r_s[1][2 * r + 1])));
            x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
            x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
            m_ref[r] = x == -INFINITY ? 0.f : x;
            /* alpha = exp2(m_i − m_new): l_i and O are rescaled */
            alpha[r] = ex2(m_i[r] - m_ref[r]);
            l_i[r] *= alpha[r];
            m_i[r] = x;
        }
        /* Once the running max has settled, most blocks leave every row's max as it was (alpha
         * exactly 1): the warp then skips its D/2 multiplications of O per thread. */
        if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
            for (int n = 0; n < D / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    r_o[n][e] *= alpha[e / 2];
        }

        /* P = exp2(s − m_new); l_i += rowsum(P). The C fragments of n-tiles 0 and 1 are the A
         * fragment of P for keys 0..15: a0 (g, 2t..), a1 (g+8, 2t..), a2, a3 the same of tile 1. */
        uint32_t r_p[4];
#pragma unroll
        for (int n = 0; n < 2; n++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                r_s[n][e] = ex2(r_s[n][e] - m_ref[e / 2]);
                l_i[e / 2] += r_s[n][e];
            }
            r_p[2 * n] = pack2<T>(r_s[n][0], r_s[n][1]);
            r_p[2 * n + 1] = pack2<T>(r_s[n][2], r_s[n][3]);
        }

        /* O += P V: ldmatrix.trans of V (keys × cols) gives b0, b1 of n-tiles 2n2 and 2n2+1. */
#pragma unroll
        for (int n2 = 0; n2 < D / 16; n2++) {
            uint32_t r_v[4];
            ldsm_x4_trans(r_v, frag_addr<D>(s_v, lane_off, 0, 2 * n2));
            mma16816<T>(r_o[2 * n2], r_p, r_v[0], r_v[1]);
            mma16816<T>(r_o[2 * n2 + 1], r_p, r_v[2], r_v[3]);
        }
        const bool end = --cs_left == 0;
        cs_left = end ? run : cs_left;
        key0 += end ? jump : 16;
    }

    /* Only empty groups can remain; warp barrier: every lane is done reading the ring that the
     * partial below overwrites. */
    cp_async_wait<0>();
    __syncwarp();
    TRACE_CLK(c3);
    auto &part = s.w[warp].part;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float l = l_i[r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
#pragma unroll
        for (int n = 0; n < D / 8; n++)
            *reinterpret_cast<float2 *>(&part.o[g + 8 * r][8 * n + 2 * t]) = make_float2(r_o[n][2 * r], r_o[n][2 * r + 1]);
        if (t == 0) {
            part.m[g + 8 * r] = m_i[r];
            part.l[g + 8 * r] = l;
        }
    }
    /* Barrier: every warp's (m, l, O) is visible to the merge. */
    __syncthreads();
    TRACE_CLK(c4);

    /* Merge the warps: M = max m_w, l = Σ l_w · exp2(m_w − M), O = Σ O_w · exp2(m_w − M) / l;
     * lse = M + log2 l. A row no warp saw a key for gets O = 0, lse = −inf. First each row's
     * weights exp2(m_w − M) / l, once per row (one thread each), then the elements of the tile's
     * real rows: WARPS independent loads each. */
    const int nrows = min(16, R - r0);
    if (threadIdx.x < nrows) {
        const int r = threadIdx.x;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < WARPS; w++)
            M = fmaxf(M, s.w[w].part.m[r]);
        float f[WARPS], l = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; w++) {
            f[w] = M == -INFINITY ? 0.f : ex2(s.w[w].part.m[r] - M);
            l += s.w[w].part.l[r] * f[w];
        }
        /* l = 0: no key; l NaN (a NaN score, or +inf: inf − inf) stays NaN in O and lse. */
        const float inv_l = l == 0.f ? 0.f : 1.f / l;
#pragma unroll
        for (int w = 0; w < WARPS; w++)
            s.wt[w][r] = valid ? f[w] * inv_l : NAN;
        s.lse_cta[r] = valid ? (l == 0.f ? -INFINITY : M + log2f(l)) : NAN;
    }
    /* Barrier: the row weights are visible. */
    __syncthreads();
    for (int idx = threadIdx.x; idx < nrows * D; idx += C::THREADS) {
        const int r = idx / D, col = idx % D, row = r0 + r;
        if (col >= d)
            continue;
        float val = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; w++)
            val += s.w[w].part.o[r][col] * s.wt[w][r];
        if (a.cluster) {                                /* this thread alone reads (r, col) of part.o */
            s.w[0].part.o[r][col] = val;
        } else {
            const int64_t h = hk * G + row % G, i = row / G;
            store_result<T, VAR>(a, split, (b * p.Hq + h) * Nq + i, b, h, i, col, val, s.lse_cta[r]);
        }
    }
    if (a.cluster)
        cluster_merge<T, C, VAR>(a, s, b, hk, r0);
#ifdef FA_DECODE_TRACE
    TRACE_CLK(c5);
    const uint64_t gt5 = trace_gt();
    if (threadIdx.x == 0) {
        unsigned smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        const unsigned long long seq = atomicAdd(&g_decode_trace_seq, 1ull);
        printf("TRACE %llu %u %u %d %d %d %llu %llu %lld %lld %lld %lld %lld\n", seq, gridDim.x, blockIdx.x, smid,
               a.cluster, (int)a.splits, gt0, gt5, c1 - c0, c2 - c0, c3 - c0, c4 - c0, c5 - c0);
    }
#endif
}

#endif /* FA_DECODE_ATTEND_CUH */
