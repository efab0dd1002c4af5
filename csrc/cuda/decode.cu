/*
 * decode.cu — fa_forward_kvcache_cuda: attention of a few queries over a KV cache, split-KV
 * ("flash-decoding"), with ragged cache lengths, in-place append and bottom-right causal masking.
 * The semantics are fa_forward_kvcache_cpu's (fa_cpu.c, fa.h); up to three kernels on one stream:
 *
 *   1. append   k_new / v_new rows → cache rows cache_seqlens[b] ..  (only when Nnew > 0)
 *   2. attend   grid (row tile, split, b·Hkv + hk): one CTA reads keys [s·chunk, (s+1)·chunk) of
 *               its sequence, clipped to the L_b = cache_seqlens[b] + Nnew valid keys, so a
 *               ragged batch reads only its tokens. The Nq · G query rows that share a KV head
 *               (G = Hq / Hkv; packed row r = i·G + g is query i of head hk·G + g) form one
 *               tile of 16 rows, so K and V are read once per tile.
 *   3. combine  per output row, merges the splits' partial O and lse (skipped when splits == 1:
 *               the attend kernel then writes O itself). On sm_90 with 2 to 8 splits (tensor
 *               cores) the splits of a row tile run as one thread block cluster instead, grid
 *               (split, row tile, b·Hkv + hk), and merge through distributed shared memory
 *               (cluster_merge): no partials in global memory and no third launch.
 *
 * Attend, fp16/bf16 (tensor cores): each of the WARPS warps (4, or 8 for long splits at d ≤ 128)
 * walks its own blocks of 16 keys (runs of DECODE_RUN = 4 adjacent blocks, run r of the chunk to
 * warp r % WARPS) through a private cp.async ring of STAGES buffers, so the key loop has no CTA
 * barrier. Q and the first STAGES − 1 blocks are requested before cache_seqlens is read (from the
 * chunk's rows in the cache; a block that turns out to hold rows past the valid length is loaded
 * again with zeros there), so the CTA's first memory latency is not spent waiting for L_b.
 * c = scale · log2(e):
 *
 *     S = Q Kᵀ                      mma.m16n8k16, queries padded to 16 rows, fp32 accumulate
 *     s = S · c, −inf where key ≥ L_b or (causal) key > L_b − Nq + i
 *     m_new = max(m, rowmax(s)),  P = exp2(s − m_new)
 *     l = l · exp2(m − m_new) + rowsum(P),  O = O · exp2(m − m_new) + P V
 *
 * and at the end the 4 warps' (m, l, O) are merged through shared memory into O / l and
 * lse = m + log2 l. VAR instantiations (fa_forward_kvcache_variants_cuda) add the window about
 * δ = L_b − Nq, softcap and ALiBi per score, and sinks where a row ends; with a window the splits
 * divide the tile's window span, whose start needs cache_seqlens before the first K/V request.
 * attention calls routed here (fa_decode_attention_cuda: every key of k and v, a decoding step) also
 * bring key_mask, read a run of 64 keys ahead.
 * fp32 (and the simt family, or a device without room for the tile) runs the CUDA-core kernel: one
 * warp per (query row, split), lanes over the head dim, 4 keys at a time.
 *
 * Split count (shapes and the device only, so a CUDA graph replays it): the fewest splits whose
 * CTAs fill their last wave of the attend kernel within 5% of the best count, at most one split per
 * 128 keys of Nmax (d <= 64: two CTAs per SM, plan_splits); chunk = ceil(Nmax / splits) rounded up
 * to 64 keys. It never reads cache_seqlens on the host: a bad entry (fa.h) leaves the caches
 * untouched and makes the output NaN, checked by every CTA on the device.
 *
 * This file, in order: the host planner (tile, warps, stages, splits, cluster, evict-first; the
 * split counts themselves in plan.c), the launch, and its entry points (the KV cache's, and
 * fa_decode_attention_cuda for attention calls). decode_attend.cuh: the tensor-core attend kernel
 * (2a, with its cluster merge); decode_simt.cu: append, the CUDA-core attend kernel and the combine
 * kernels; decode.cuh: what they share; tiles.h: the tiles. Builds with plain
 * nvcc; includes CUDA headers and the project's own headers only:
 *     nvcc -std=c++17 -O3 -Xptxas -v -gencode arch=compute_90a,code=sm_90a -Icsrc -Icsrc/cuda -c csrc/cuda/decode.cu
 */
#include "decode.cuh"
#include "tiles.h"
#include "trace.cuh"
#include "variants.cuh"
#include "decode_attend.cuh"

/* ---- Host: the plan ------------------------------------------------------------------------- */

/* The attend kernel chosen for a call and what the split rule needs of it. */
typedef struct {
    decode_kernel attend, combine, combine_wide;
    size_t smem;
    int ctas_per_sm;         /* occupancy of attend */
    int64_t ctas_per_split;  /* attend CTAs that one split adds */
    int mma;                 /* tensor-core kernel (grid over row tiles), else SIMT */
    int threads;             /* attend kernel's block size */
    int (*cluster_ok)[MAX_CLUSTER + 1];   /* per device and cluster size: clusters resident at
                                             once, −1 none, 0 not asked */
} decode_plan;

/* Once per device and kernel: raise its dynamic shared memory limit and read its occupancy.
 * FA_ERR_UNSUPPORTED when the device has no room for it (or is below sm_80 for MMA), checked on
 * every call from the cached device info (so a test's fa_overrides.device_cc applies). */
static int kernel_setup(decode_kernel kernel, size_t smem, int threads, int mma, int dev, int *occ,
                        int cache[32])
{
    int cur;
    fa_device info;
    const int st = fa_device_current(&cur, &info);
    if (st != FA_OK)
        return st;
    if ((mma && info.major < 8) || smem > (size_t)info.smem_optin)
        return FA_ERR_UNSUPPORTED;
    if (dev < 32 && (*occ = __atomic_load_n(&cache[dev], __ATOMIC_ACQUIRE)) != 0)
        return *occ > 0 ? FA_OK : FA_ERR_UNSUPPORTED;
    if (smem > 48 * 1024)
        FA_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    FA_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(occ, kernel, threads, smem));
    *occ = *occ > 0 ? *occ : -1;
    if (dev < 32)
        __atomic_store_n(&cache[dev], *occ, __ATOMIC_RELEASE);
    return *occ > 0 ? FA_OK : FA_ERR_UNSUPPORTED;
}

template <typename T, class C, bool VAR = false>
static int plan_mma(decode_plan *pl, int dev)
{
    static int s_occ[32];
    const decode_simt_kernels ks = decode_simt_kernels_for(decode_dtype<T>());
    pl->attend = fa_decode_attend_kernel<T, C, VAR>;
    pl->combine = ks.combine;
    pl->combine_wide = ks.combine_wide;
    pl->smem = sizeof(decode_smem<C>);
    pl->mma = 1;
    pl->threads = C::THREADS;
    static int s_cluster_ok[32][MAX_CLUSTER + 1];
    pl->cluster_ok = s_cluster_ok;
    return kernel_setup(pl->attend, pl->smem, C::THREADS, 1, dev, &pl->ctas_per_sm, s_occ);
}

template <typename T>
static int plan_simt(decode_plan *pl, int dev)
{
    static int s_occ[32];
    const decode_simt_kernels ks = decode_simt_kernels_for(decode_dtype<T>());
    pl->attend = ks.attend;
    pl->combine = ks.combine;
    pl->combine_wide = ks.combine_wide;
    pl->smem = 0;
    pl->mma = 0;
    pl->threads = 128;
    return kernel_setup(pl->attend, 0, 128, 0, dev, &pl->ctas_per_sm, s_occ);
}

/* The d in (64, 128] tiles: 4 or 8 warps, a ring of 2 or 3 stages per warp. */
static int plan_d128(decode_plan *pl, int bf16, int warps, int stages, int dev)
{
    if (stages == 2 && warps == 8)
        return bf16 ? plan_mma<__nv_bfloat16, decode_tile_d128_w8_s2>(pl, dev)
                    : plan_mma<__half, decode_tile_d128_w8_s2>(pl, dev);
    if (stages == 2)
        return bf16 ? plan_mma<__nv_bfloat16, decode_tile_d128_s2>(pl, dev)
                    : plan_mma<__half, decode_tile_d128_s2>(pl, dev);
    if (warps == 8)
        return bf16 ? plan_mma<__nv_bfloat16, decode_tile_d128_w8>(pl, dev)
                    : plan_mma<__half, decode_tile_d128_w8>(pl, dev);
    return bf16 ? plan_mma<__nv_bfloat16, decode_tile_d128>(pl, dev) : plan_mma<__half, decode_tile_d128>(pl, dev);
}

/* How many clusters of n attend CTAs (2 <= n <= MAX_CLUSTER) the device holds at once (0: none);
 * asked once per device, kernel and n. */
static int cluster_wave(const decode_plan *pl, int n, int dev)
{
    if (dev < 0 || dev >= 32 || n < 2 || n > MAX_CLUSTER)
        return 0;
    int ok = __atomic_load_n(&pl->cluster_ok[dev][n], __ATOMIC_ACQUIRE);
    if (ok == 0) {
        cudaLaunchAttribute attr;
        attr.id = cudaLaunchAttributeClusterDimension;
        attr.val.clusterDim.x = (unsigned)n;
        attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
        cudaLaunchConfig_t cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDim = dim3((unsigned)n);
        cfg.blockDim = dim3((unsigned)pl->threads);
        cfg.dynamicSmemBytes = pl->smem;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        int clusters = 0;
        if (cudaOccupancyMaxActiveClusters(&clusters, (const void *)pl->attend, &cfg) != cudaSuccess) {
            cudaGetLastError();                         /* not sticky: clear it */
            clusters = 0;
        }
        ok = clusters > 0 ? clusters : -1;
        __atomic_store_n(&pl->cluster_ok[dev][n], ok, __ATOMIC_RELEASE);
    }
    return ok > 0 ? ok : 0;
}

/* Split count, chunk and cluster size of a call for plan pl (a->row_tiles and a->rows set). */
static void plan_splits(decode_plan *pl, decode_args *a, const fa_params *p, const fa_overrides *o, int sms,
                        int major, int dev)
{
    a->cluster = 0;
    pl->ctas_per_split = pl->mma ? (int64_t)a->row_tiles * p->B * p->Hkv : (a->rows + 3) / 4;

    /* splits: by the d <= 64 rule on tensor cores, else by waves (plan.c). */
    const int64_t wave = (int64_t)sms * pl->ctas_per_sm, cps = pl->ctas_per_split;
    const int d64 = pl->mma && p->d <= 64;
    int64_t splits = d64 ? fa_plan_decode_splits_d64(wave, cps, sms, p->Nk)
                           : fa_plan_decode_splits_by_waves(wave, cps, p->Nk);
    /* sm_90, tensor-core kernel: the splits of a row tile can merge inside one thread block
     * cluster (cluster_merge) instead of through the combine kernel. fa_overrides.decode_cluster
     * turns that off (1), or drops the wave condition below (2). */
    const int cl_off = o->decode_cluster == 1, cl_on = o->decode_cluster == 2;
    const int can_cluster = pl->mma && major >= 9 && !cl_off;
    /* Where the rule splits and each split is short, fewer splits merged in clusters beat more
     * splits and the combine launch: the fewest (2..MAX_CLUSTER) whose CTAs cover 15/16 of the
     * SMs in one wave of clusters, if each then reads at most 2 MB of K and V. tools/decode_sweep.py,
     * read flush, H200 (bench/LOG.md, 2026-11-30): B = 1 H 32/32 4k 2.18 → 2.54 TB/s (4 splits in
     * clusters against 8 combined), B = 8 H 32/8 8k 3.52 → 3.68 (2 against 4); with long chunks
     * fewer splits lost up to 10 % (B = 8 32k ragged: 2 in clusters 3.30, 4 combined 3.68).
     * One long sequence with few row tiles (long8): MAX_CLUSTER splits in clusters of the 8-warp tile,
     * though they cover only half the SMs, where every chunk reads at least 8192 keys (no 2 MB
     * bound: with B = 1 no sequence is shorter than another). Read flush, H200 (bench/LOG.md,
     * 2026-11-30, split sweep): B = 1 H 32/8 64k 3.87 TB/s against 16 combined 3.68, 128k 4.22
     * against 4.13, 256k 4.42 against 4.38. */
    if (can_cluster && splits >= 2 && !d64) {
        int64_t sc = 2;
        while (sc < MAX_CLUSTER && sc * cps < sms - sms / 16)
            sc++;
        const int64_t sc_chunk = ((p->Nk + sc - 1) / sc + 63) / 64 * 64;
        const int covers = sc * cps >= sms - sms / 16 && sc_chunk * 4 * p->d <= (int64_t)2 << 20;
        const int long8 = p->B == 1 && sc == MAX_CLUSTER && pl->threads == 256
                       && 2 * sc * cps >= sms - sms / 16 && sc_chunk >= 8192;
        if (sc <= splits && (covers || long8) && cluster_wave(pl, (int)sc, dev) >= cps)
            splits = sc;
    }
    /* fa_overrides.decode_splits overrides the rules; the chunks below keep at least 64 keys each. */
    if (o->decode_splits > 0)
        splits = o->decode_splits;
    a->chunk = ((p->Nk + splits - 1) / splits + 63) / 64 * 64;
    a->chunk = a->chunk > 0 ? a->chunk : 64;
    a->splits = p->Nk > 0 ? (p->Nk + a->chunk - 1) / a->chunk : 1;
    /* 2 to MAX_CLUSTER splits merge in clusters unless the clusters take more waves than the plain
     * grid (a GPC holds whole clusters only, so fewer CTAs may fit at once). */
    if (can_cluster && a->splits >= 2 && a->splits <= MAX_CLUSTER) {
        const int64_t cw = cluster_wave(pl, (int)a->splits, dev), clusters = cps;
        if (cw > 0 && (cl_on || (clusters + cw - 1) / cw <= (a->splits * cps + wave - 1) / wave))
            a->cluster = (int)a->splits;
    }
}

/* Everything the launch needs that depends on the shapes and the device only: the kernel, the
 * split count and the derived scalars. The same answer for fa_kvcache_scratch_bytes and the launch.
 * v (NULL: none): the variants, on the VAR attend kernels of 4 warps and 3 stages (d in (64, 128])
 * and the sink-taking combine kernels; FA_ERR_UNSUPPORTED on the CUDA-core kernel (fp32). */
static int make_plan(const fa_kvcache_params *kp, const fa_overrides *o, decode_plan *pl, decode_args *a,
                     const fa_variants *v = NULL)
{
    const fa_params *p = &kp->p;
    memset(pl, 0, sizeof *pl);
    memset(a, 0, sizeof *a);
    a->kp = *kp;
    a->nnew = kp->k_new != NULL ? kp->Nnew : 0;
    a->splits = 1;
    a->chunk = 64;
    if (p->B == 0 || p->Hq == 0 || p->Nq == 0)
        return FA_OK;                                   /* append only */
    /* Key positions and packed rows are int in the kernels (offsets are 64-bit). */
    if (p->Nk > INT32_MAX - 256 || p->Nq * (p->Hq / p->Hkv) > INT32_MAX - 256)
        return FA_ERR_UNSUPPORTED;
    a->G = (int)(p->Hq / p->Hkv);
    a->R = (int)(p->Nq * a->G);
    a->row_tiles = (a->R + 15) / 16;
    a->rows = p->B * p->Hq * p->Nq;
    a->scale_log2 = p->scale * FA_LOG2E;

    int dev;
    fa_device info;
    int st = fa_device_current(&dev, &info);
    if (st != FA_OK)
        return st;
    const int sms = info.sms, major = info.major, l2_bytes = info.l2_bytes;
    /* The simt family forces the CUDA-core kernel; the forward families leave the choice here. */
    const int simt = p->dtype == FA_FLOAT32 || o->family == FA_FAMILY_SIMT;
    fa_params span = *p;                                /* the keys the splits divide: Nmax, or a window's */
    st = FA_ERR_UNSUPPORTED;
    if (v != NULL) {
        if (simt)
            return FA_ERR_UNSUPPORTED;
        const int bf16 = p->dtype == FA_BFLOAT16;
        st = p->d <= 64 ? (bf16 ? plan_mma<__nv_bfloat16, decode_tile_d64, true>(pl, dev)
                                : plan_mma<__half, decode_tile_d64, true>(pl, dev))
           : p->d <= 128 ? (bf16 ? plan_mma<__nv_bfloat16, decode_tile_d128, true>(pl, dev)
                                 : plan_mma<__half, decode_tile_d128, true>(pl, dev))
           : (bf16 ? plan_mma<__nv_bfloat16, decode_tile_d256, true>(pl, dev)
                   : plan_mma<__half, decode_tile_d256, true>(pl, dev));
        if (st != FA_OK)
            return st;
        if (v->sinks != NULL) {
            const decode_simt_kernels ks = decode_simt_kernels_for(p->dtype);
            pl->combine = ks.combine_sinks;
            pl->combine_wide = ks.combine_wide_sinks;
        }
        /* A side wider than any row reaches is unbounded: −1. A row's position i + δ lies in
         * [−Nq, Nmax − 1], so a left side from Nmax and a right side from Nq + Nmax reach every key;
         * a right side short of that but past an int (Nq near 2³¹) is not taken. */
        const int64_t reach = p->Nq + p->Nk, left = v->window ? v->window_left : -1;
        const int64_t right = p->causal ? 0 : v->window ? v->window_right : -1;
        if (right < reach && right > INT32_MAX)
            return FA_ERR_UNSUPPORTED;
        a->v = *v;
        a->var_left = left >= p->Nk ? -1 : (int)left;
        a->var_right = right >= reach ? -1 : (int)right;
        a->cap_c = v->softcap > 0.f ? v->softcap * FA_LOG2E : 0.f;
        a->cap_in = v->softcap > 0.f ? p->scale / v->softcap : 0.f;
        /* A window's left side bounds the keys any tile reads to Nq + left + max(right, 0) + 1 from
         * its first row's first key: the splits divide that span, from there (win_base), not Nmax. */
        const int64_t win = a->var_left >= 0 ? p->Nq + a->var_left + (a->var_right > 0 ? a->var_right : 0) + 1
                                             : p->Nk;
        a->win_base = win < p->Nk;
        span.Nk = a->win_base ? win : p->Nk;
    } else if (!simt) {
        const int bf16 = p->dtype == FA_BFLOAT16;
        /* d in (64, 128]: 8 warps per CTA (one CTA per SM) where that grid is one wave and every
         * split reads at least 2048 keys, else 4 warps (two CTAs per SM). Same run, read
         * flush, H200 (bench/LOG.md, 2026-11-30): 8 warps B = 8 H 32/8 8k 71.4 → 69.0 µs, 32k
         * 246.2 → 240.0, 32k ragged 170.9 → 150.4; lost where 8 warps took two waves (B = 32 4k
         * 124.9 → 128.8) or had short splits (B = 1 H 32/32 4k, 1024 keys: 26.4 → 29.6). With
         * 2048-key splits (bench/log/2026-11-30-decode-readahead-claim/decode_sweep_spec.txt): B = 8 H 32/8 4k 3.06 → 3.24 TB/s,
         * B = 2 H 32/32 4k 3.17 → 3.26, B = 16 4k 3.78 → 3.86; lost at B = 1 H 32/32 8k 3.18 →
         * 3.10. fa_overrides.decode_warps forces one tile (8 needs sm_90's shared memory; elsewhere
         * it falls back to 4). */
        const int force4 = o->decode_warps == 4, force8 = o->decode_warps == 8;
        if (p->d <= 64)
            st = bf16 ? plan_mma<__nv_bfloat16, decode_tile_d64>(pl, dev) : plan_mma<__half, decode_tile_d64>(pl, dev);
        else if (p->d <= 128) {
            if (!force4 && (major >= 9 || force8)) {
                st = plan_d128(pl, bf16, 8, 3, dev);
                if (st == FA_OK && !force8) {
                    plan_splits(pl, a, p, o, sms, major, dev);
                    if (a->splits * pl->ctas_per_split > (int64_t)sms * pl->ctas_per_sm || a->chunk < 2048)
                        st = FA_ERR_UNSUPPORTED;
                }
                if (st != FA_OK && st != FA_ERR_UNSUPPORTED)
                    return st;
            }
            if (st != FA_OK)
                st = plan_d128(pl, bf16, 4, 3, dev);
        } else
            st = bf16 ? plan_mma<__nv_bfloat16, decode_tile_d256>(pl, dev) : plan_mma<__half, decode_tile_d256>(pl, dev);
    }
    if (st == FA_ERR_UNSUPPORTED)                       /* fp32, forced, or no room for the tile */
        st = p->dtype == FA_FLOAT32 ? plan_simt<float>(pl, dev)
           : p->dtype == FA_FLOAT16 ? plan_simt<__half>(pl, dev) : plan_simt<__nv_bfloat16>(pl, dev);
    if (st != FA_OK)
        return st;
    plan_splits(pl, a, &span, o, sms, major, dev);
    /* d in (64, 128]: two stages per warp (one 8 KB block in flight while the warp computes
     * another) where the grid's first wave holds at least 6 warps per SM, else three. Bytes in
     * flight past what the DRAM's bandwidth-latency product needs (~8 MB on the H200) cost time:
     * same call, read flush, 2 against 3 stages (bench/LOG.md, 2026-11-30,
     * bench/log/2026-11-30-decode-stages-runs/decode_sweep_stages.txt): B = 1 H 32/32 32k 4.07 → 4.14 TB/s, B = 8 H 32/8 8k
     * 3.74 → 3.87, B = 32 4k 4.19 → 4.26, B = 8 32k ragged 3.71 → 3.92, B = 16 H 32/32 4k
     * 4.30 → 4.42. Where half the SMs stream (the 8-warp clusters of 8 at B = 1, 512 warps) three
     * stages win: B = 1 H 32/8 128k 4.11 against 3.91, 64k 3.74 against 3.62.
     * fa_overrides.decode_stages forces one. */
    if (pl->mma && p->d > 64 && p->d <= 128 && v == NULL) {
        const int64_t grid = a->splits * pl->ctas_per_split, wave = (int64_t)sms * pl->ctas_per_sm;
        int two = (grid < wave ? grid : wave) * (pl->threads / 32) >= 6 * (int64_t)sms;
        if (o->decode_stages != 0)
            two = o->decode_stages == 2;
        if (two) {
            st = plan_d128(pl, p->dtype == FA_BFLOAT16, pl->threads / 32, 2, dev);
            if (st != FA_OK)
                return st;
            plan_splits(pl, a, p, o, sms, major, dev);
        }
    }
    /* Combine: past 24 splits a row's loads are spread over 4 warps (one row per CTA). H200, CUPTI
     * (bench/LOG.md, 2026-11-30), one thread per element against four warps per row: 2.3–3.3 µs
     * against 3.5–4.3 at 16 splits, 3.0–4.1 against 3.7–4.4 at 24, 4.0–4.9 against 3.6–4.4 at 32;
     * the element kernel takes one more memory latency per 8 splits. fa_overrides.decode_combine
     * forces one kernel. */
    a->combine_wide = a->splits > 24 && a->rows <= INT32_MAX;
    /* K and V streamed with an L2 evict-first policy where one CTA reads each key (one row tile)
     * and the whole caches (B · Hkv · Nmax rows of each) are at most 4× the L2: such a short stream
     * would otherwise push out most of what the L2 held, and when that was written by the kernels
     * before (as after bench.decode's zero fill) the write-backs share the stream's DRAM time.
     * H200, 50 MB L2, zero fill (bench/LOG.md, 2026-11-30, bench/log/2026-11-30-decode-evict-warps/decode_sweep_evict.txt):
     * B = 1 H 32/32 4k 2.11–2.23 → 2.42–2.43 TB/s, 8k 2.73–2.78 → 2.92–2.94, B = 8 H 32/8 4k
     * 2.69–2.81 → 2.97–2.99; even at 268 MB; 2–5 % lost at 537 MB (B = 8 H 32/8 32k 4.16 → 3.97).
     * Read flush: within 1 % everywhere. fa_overrides.decode_evict forces it off (1) or on (2). */
    const int64_t kv_bytes = 2 * 2 * p->B * p->Hkv * p->Nk * p->d;   /* K and V, 2-byte elements */
    a->evict_first = pl->mma && a->row_tiles == 1 && kv_bytes <= 4 * (int64_t)l2_bytes;
    if (o->decode_evict != 0)
        a->evict_first = o->decode_evict == 2;
    if (o->decode_combine == 1)
        a->combine_wide = 0;
    if (o->decode_combine == 2 && a->rows <= INT32_MAX)
        a->combine_wide = 1;
    return FA_OK;
}

/* ---- Host: launch --------------------------------------------------------------------------- */

static int aligned16(const void *ptr, int64_t s0, int64_t s1, int64_t s2, int64_t es)
{
    return (uintptr_t)ptr % 16 == 0 && (s0 * es) % 16 == 0 && (s1 * es) % 16 == 0 && (s2 * es) % 16 == 0;
}

static size_t scratch_size(const decode_args *a)
{
    return a->splits > 1 && !a->cluster ? (size_t)(a->splits * a->rows * (a->kp.p.d + 1)) * sizeof(float) : 0;
}

/* A KV-cache call's variants (fa_kvcache_variants); v_in NULL or without any: the plain kernels.
 * key_mask_ok (plain attention's route, fa_decode_attention_cuda): v_in's key_mask, which the
 * caller checked, is kept; the KV-cache entries decline it. */
static int kvcache_variants(const fa_kvcache_params *kp, const fa_variants *v_in, fa_variants *v, int *any,
                            int key_mask_ok)
{
    *any = fa_has_variants(v_in);
    if (!*any)      /* none asked for, but its other fields checked as the C backend checks them */
        return v_in == NULL ? FA_OK : fa_check_variants(&kp->p, v_in);
    fa_variants in = *v_in;
    if (key_mask_ok)
        in.key_mask = NULL;
    const int st = fa_kvcache_variants(kp, &in, v);
    v->key_mask = v_in->key_mask;
    return st;
}

static int scratch_bytes_of(const fa_kvcache_params *kp, const fa_variants *v_in, int key_mask_ok, size_t *bytes)
{
    *bytes = 0;
    int st = fa_check_kvcache_params(kp);
    if (st != FA_OK)
        return st;
    fa_variants v;
    int any;
    if ((st = kvcache_variants(kp, v_in, &v, &any, key_mask_ok)) != FA_OK)
        return st;
    decode_plan pl;
    decode_args a;
    fa_overrides o;
    fa_get_overrides(&o);
    st = make_plan(kp, &o, &pl, &a, any ? &v : NULL);
    if (st == FA_OK)
        *bytes = scratch_size(&a);
    return st;
}

extern "C" int fa_kvcache_scratch_bytes(const fa_kvcache_params *kp, size_t *bytes)
{
    return scratch_bytes_of(kp, NULL, 0, bytes);
}

extern "C" int fa_kvcache_variants_scratch_bytes(const fa_kvcache_params *kp, const fa_variants *v, size_t *bytes)
{
    return scratch_bytes_of(kp, v, 0, bytes);
}

extern "C" int fa_decode_attention_scratch_bytes(const fa_kvcache_params *kp, const fa_variants *v, size_t *bytes)
{
    return scratch_bytes_of(kp, v, 1, bytes);
}

static int forward_kvcache(const fa_kvcache_params *kp, const fa_variants *v_in, int key_mask_ok, void *scratch,
                           size_t scratch_bytes, struct CUstream_st *stream)
{
    int st = fa_check_kvcache_params(kp);
    if (st != FA_OK)
        return st;
    fa_variants v;
    int any;
    if ((st = kvcache_variants(kp, v_in, &v, &any, key_mask_ok)) != FA_OK)
        return st;
    const fa_params *p = &kp->p;
    if (p->B == 0)
        return FA_OK;
    /* Without cache_seqlens every sequence starts at Nmax − Nnew: checked here, on the host. */
    if (kp->cache_seqlens == NULL && kp->k_new != NULL && kp->Nnew > p->Nk)
        return FA_ERR_SEQLEN;
    decode_plan pl;
    decode_args a;
    fa_overrides o;
    fa_get_overrides(&o);
    st = make_plan(kp, &o, &pl, &a, any ? &v : NULL);
    if (st != FA_OK)
        return st;
    if (scratch_bytes < scratch_size(&a) || (scratch_size(&a) > 0 && scratch == NULL))
        return FA_ERR_SCRATCH;
    if (a.splits > 1 && !a.cluster) {
        a.o_part = (float *)scratch;
        a.lse_part = a.o_part + a.splits * a.rows * p->d;
    }
    const int64_t es = p->dtype == FA_FLOAT32 ? 4 : 2;
    a.vec_kv = aligned16(p->k, p->k_batch_stride, p->k_head_stride, p->k_row_stride, es)
            && aligned16(p->v, p->v_batch_stride, p->v_head_stride, p->v_row_stride, es);
    a.vec_q = aligned16(p->q, p->q_batch_stride, p->q_head_stride, p->q_row_stride, es);
    a.vec_append = a.vec_kv && (p->d * es) % 16 == 0
                && aligned16(kp->k_new, kp->kn_batch_stride, kp->kn_head_stride, kp->kn_row_stride, es)
                && aligned16(kp->v_new, kp->vn_batch_stride, kp->vn_head_stride, kp->vn_row_stride, es);

    /* Grid sizes, all checked before the append writes anything into the caches. */
    const int64_t append_blocks = (p->B * p->Hkv * a.nnew + 3) / 4;
    const int64_t attend_blocks = pl.mma ? pl.ctas_per_split * a.splits : (a.rows * a.splits + 3) / 4;
    const int64_t combine_rows = 128 / combine_tpr((int)p->d);   /* per CTA of the element kernel */
    const int64_t combine_blocks = a.combine_wide ? a.rows : (a.rows + combine_rows - 1) / combine_rows;
    if (append_blocks > INT32_MAX || attend_blocks > INT32_MAX || combine_blocks > INT32_MAX)
        return FA_ERR_UNSUPPORTED;

    /* 1. Append (before attention on the same stream: the attend kernel reads the new rows). */
    if (append_blocks > 0) {
        decode_append_kernel_ptr()<<<(unsigned)append_blocks, 128, 0, stream>>>(a);
        FA_CUDA_TRY(cudaGetLastError());
    }
    if (p->Hq == 0 || p->Nq == 0)
        return FA_OK;

    /* 2. Attend, 3. combine (unless the clusters merged the splits). */
    if (a.cluster) {
        cudaLaunchAttribute attr;
        attr.id = cudaLaunchAttributeClusterDimension;
        attr.val.clusterDim.x = (unsigned)a.cluster;
        attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
        cudaLaunchConfig_t cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDim = dim3((unsigned)attend_blocks);
        cfg.blockDim = dim3((unsigned)pl.threads);
        cfg.dynamicSmemBytes = pl.smem;
        cfg.stream = stream;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        FA_CUDA_TRY(cudaLaunchKernelEx(&cfg, pl.attend, a));
        FA_CUDA_TRY(cudaGetLastError());
        return FA_OK;
    }
    pl.attend<<<(unsigned)attend_blocks, (unsigned)pl.threads, pl.smem, stream>>>(a);
    FA_CUDA_TRY(cudaGetLastError());
    if (a.splits > 1) {
        (a.combine_wide ? pl.combine_wide : pl.combine)<<<(unsigned)combine_blocks, 128, 0, stream>>>(a);
        FA_CUDA_TRY(cudaGetLastError());
    }
    return FA_OK;
}

extern "C" int fa_forward_kvcache_cuda(const fa_kvcache_params *kp, void *scratch, size_t scratch_bytes,
                                       struct CUstream_st *stream)
{
    return forward_kvcache(kp, NULL, 0, scratch, scratch_bytes, stream);
}

extern "C" int fa_forward_kvcache_variants_cuda(const fa_kvcache_params *kp, const fa_variants *v, void *scratch,
                                                size_t scratch_bytes, struct CUstream_st *stream)
{
    return forward_kvcache(kp, v, 0, scratch, scratch_bytes, stream);
}

extern "C" int fa_decode_attention_cuda(const fa_kvcache_params *kp, const fa_variants *v, void *scratch,
                                        size_t scratch_bytes, struct CUstream_st *stream)
{
    return forward_kvcache(kp, v, 1, scratch, scratch_bytes, stream);
}
