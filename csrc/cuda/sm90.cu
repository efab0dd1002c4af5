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
 * Where the rest lives: the kernel arguments, shared memory and consumer steps in sm90_steps.cuh,
 * the work items' walks in sm90_walk.cuh, the kernel itself (producer, consumers, split-tile merge)
 * in sm90_kernel.cuh, the tile shapes and their measured reasons in tiles.h, the Hopper PTX wrappers
 * in ptx_sm90.cuh (wgmma instructions: wgmma.cuh, generated), the grid and walk rules in plan.c, the
 * tools' timing hooks in trace.cuh, the variants' steps (VAR) in variants.cuh and sm90_variants.cuh.
 * This file: the host launch (tensor maps, grid, the tile for a call) and the entry points of
 * families.h. Builds with plain nvcc:
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

#include "sm90_steps.cuh"
#include "sm90_walk.cuh"
#include "sm90_kernel.cuh"

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
 * scratch (may be NULL): room for a split last round (plan.c, fa_plan_sm90_walk; with too little
 * the last round's tiles run whole), or PACKED the walk's counter (without it the walk is static).
 * need != NULL: only the scratch the call would use is returned in *need, nothing runs. VAR: the
 * kernel with the variants of v, which never splits a tile; PACKED: with packed sequences (v's
 * cu_seqlens, which every packed call has and no other); EXTRA: the plain kernel with v's sinks
 * (SM90_SINK; its split tiles' merge adds them too) or ALiBi slopes (SM90_ALIBI). */
template <typename T, class C, int VAR = 0, bool PACKED = false, int EXTRA = 0>
static int sm90_launch(const fa_params *p, const fa_overrides *o, void *scratch, size_t scratch_bytes,
                       size_t *need, cudaStream_t stream, const fa_variants *v = NULL)
{
    typedef typename sm90_kargs<VAR>::type args_t;
    void (*kernel)(const args_t) = fa_sm90_forward_kernel<T, C, false, VAR, PACKED, EXTRA>;
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
                FA_CUDA_TRY(cudaFuncSetAttribute(fa_sm90_forward_kernel<T, C, true, 0, false, EXTRA>,
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
    /* PACKED without cu_seqlens: an unpacked call on the packed walk (fa_plan_sm90_counter), which
     * reads no key_mask or attn_mask. */
    const bool packed = VAR && v->cu_seqlens_q != NULL;
    if (packed ? !PACKED : PACKED && (v->key_mask != NULL || v->mask != NULL))
        return FA_ERR_UNSUPPORTED;
    /* The most keys a row sees: a window bounded on both sides (causal: right 0) bounds them. */
    int64_t keys = p->Nk;
    if constexpr (VAR) {
        a.var = var_resolve(p, v);                  /* row + δ ± side in 32 bits: Nq + Nk < 2³¹ */
        if (a.var.left >= 0 && a.var.right >= 0)
            keys = (int64_t)a.var.left + a.var.right + 1;
    }
    /* Packed: a CTA per SM taking the items from a counter (packed_find), or without the scratch
     * for it, or with sm90_grid = 2 or 3, every grid-th; sm90_grid = 1: one item per CTA, over as many
     * CTAs as the longest sequence would give every sequence (those past the last item leave). */
    const int pairs = !PACKED && fa_plan_sm90_pairs(p, o, keys, a.n_q_tiles, VAR ? v : NULL);
    const int64_t sms = a.n_tiles < info.sms ? a.n_tiles : info.sms;   /* a persistent grid: a CTA per SM */
    /* A causal window the keys alone would put on the persistent snake: the snake modelled (the
     * scratch query and the launch each ask; a few µs at most on long rows). */
    double snake = 0.0;
    if constexpr (VAR && !PACKED)
        if (p->causal && keys < p->Nk && !pairs && o->sm90_grid == 0
            && fa_plan_sm90_persistent(p, o, keys, 0.0))
            snake = fa_plan_sm90_window_snake(p->B * p->Hq, a.n_q_tiles, sms, C::BM, C::BN, p->Nq, p->Nk,
                                              a.var.delta, a.var.left);
    const int persistent = PACKED ? o->sm90_grid != 1 : pairs || fa_plan_sm90_persistent(p, o, keys, snake);
    const int64_t grid = persistent ? sms : a.n_tiles;
    if constexpr (PACKED) {
        const bool counter = persistent && (o->sm90_grid == 0 || o->sm90_grid == 4);
        if (need != NULL) {
            *need = counter ? sizeof(int) : 0;
            return FA_OK;
        }
        if (counter && scratch != NULL && scratch_bytes >= sizeof(int))
            a.tile_counter = (int *)scratch;            /* zeroed just before the launch */
    } else if (persistent) {
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
    const int64_t heads = PACKED ? fa_plan_sm90_packed_heads(p, o) : fa_plan_sm90_heads(p, o, persistent);
    a.div_heads = sm90_divisor_make((uint32_t)heads);
    a.div_sec = sm90_divisor_make((uint32_t)(heads * a.div_full_q.d));
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
    if constexpr ((EXTRA & SM90_SINK) != 0)
        a.sinks = v->sinks;
    if constexpr ((EXTRA & SM90_ALIBI) != 0) {
        a.alibi = v->alibi_slopes;
        a.alibi_batch_stride = v->alibi_batch_stride;
    }
    size_t launch_smem = smem;
    if constexpr (VAR) {
        /* key_mask: each batch entry's key range in 8 bytes past the struct, where they fit (else
         * the kernel tests every key of every block). */
        a.key_rows = v->key_mask != NULL && !packed && smem + 8 * (size_t)p->B <= (size_t)info.smem_optin;
        if (a.key_rows)
            launch_smem += 8 * (size_t)p->B;
        if (PACKED)                                 /* the items' ring (sm90_packed_ring) */
            launch_smem += sizeof(sm90_packed_ring);
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
    a.pairs = pairs && heads == 1 && a.n_full == a.n_tiles;
    if constexpr (sm90_splits<C>() && !VAR) {
        if (a.parts > 1) {
            fa_sm90_forward_kernel<T, C, true, 0, false, EXTRA><<<(unsigned)grid, C::THREADS, smem, stream>>>(a);
            FA_CUDA_TRY(cudaGetLastError());
            const int64_t merge_blocks = a.n_split / a.parts * C::BM / MERGE_ROWS;
            fa_sm90_merge_kernel<T, C, EXTRA & SM90_SINK><<<(unsigned)merge_blocks, 32 * MERGE_ROWS, 0, stream>>>(a);
            FA_CUDA_TRY(cudaGetLastError());
            return FA_OK;
        }
    }
    if constexpr (PACKED)
        if (a.tile_counter != NULL)
            FA_CUDA_TRY(cudaMemsetAsync(a.tile_counter, 0, sizeof(int), stream));
    kernel<<<(unsigned)grid, C::THREADS, launch_smem, stream>>>(a);
    FA_CUDA_TRY(cudaGetLastError());
    return FA_OK;
}

/* Whether a call runs on the three-consumer 80-key tile: non-causal at d <= 128 from FA_SM90_LONG_NK
 * keys, or as fa_overrides.sm90_long_tile forces (1 never, 2 always). */
static bool sm90_long_tile(const fa_params *p, const fa_overrides *o)
{
    return p->d <= 128 && !p->causal && (o->sm90_long_tile ? o->sm90_long_tile == 2 : p->Nk >= FA_SM90_LONG_NK);
}

/* Whether a call runs on the 2-consumer d = 64 tile (sm90_tile_d64_short): causal up to
 * FA_SM90_D64_SHORT_CAUSAL query rows, and bottom-right (v) only up to that many keys too: its rows
 * see up to Nk keys, a long call's tiles. 1k queries over 4k keys on the 3-consumer tile: +2.4 / +2.3 %
 * (H100, bf16, two calls, bench/LOG.md 2026-12-07-fifth). Or as fa_overrides.sm90_short_tile forces
 * (1 never, 2 always). Not for narrow windows: a 192-row tile spans 64 more keys than a 128-row one,
 * yet the 2-consumer tile lost 9-24 % on causal windows (128-4096, 0) and two-sided ones (64-1024 a side)
 * (H100, bf16, tools/sm90/grids --tiles, bench/LOG.md 2026-12-07-eighth). */
static bool sm90_d64_short(const fa_params *p, const fa_overrides *o, const fa_variants *v)
{
    if (p->d > 64)
        return false;
    if (o->sm90_short_tile)
        return o->sm90_short_tile == 2;
    const bool bottom_right = v != NULL && v->align == FA_ALIGN_BOTTOM_RIGHT;
    return p->causal && p->Nq <= FA_SM90_D64_SHORT_CAUSAL && (!bottom_right || p->Nk <= FA_SM90_D64_SHORT_CAUSAL);
}

/* The tile for a call, launched (need == NULL) or asked for its scratch (sm90_launch). EXTRA: the
 * call's variants v are sinks alone or ALiBi alone (sm90_plain_extra), run by the plain tiles'
 * SM90_SINK or SM90_ALIBI kernels. */
template <int EXTRA = 0>
static int sm90_dispatch(const fa_params *p, const fa_overrides *o, void *scratch, size_t scratch_bytes,
                         size_t *need, cudaStream_t stream, const fa_variants *v = NULL)
{
    /* fp32 has its own kernel; a negative scale (Q would need negating) and Nk == 0 go to the
     * other families; TMA coordinates are 32-bit. */
    if (p->dtype == FA_FLOAT32 || p->scale < 0.f || p->Nk < 1 || p->Nq > INT32_MAX - 256
        || p->Nk > INT32_MAX - 256 || p->B > INT32_MAX || p->Hq > INT32_MAX)
        return FA_ERR_UNSUPPORTED;
    const int bf16 = p->dtype == FA_BFLOAT16;
#define FA_SM90_LAUNCH(tile)                                                                          \
    (bf16 ? sm90_launch<__nv_bfloat16, tile, 0, false, EXTRA>(p, o, scratch, scratch_bytes, need, stream, v) \
          : sm90_launch<__half, tile, 0, false, EXTRA>(p, o, scratch, scratch_bytes, need, stream, v))
    /* A long causal call at d = 128: the visibility-variant kernel on the counter walk
     * (fa_plan_sm90_causal_counter), with v's sinks when given (that kernel's own, so that a sink
     * of −inf keeps the plain call's bits); ALiBi alone stays on the plain kernel (SM90_ALIBI),
     * which that kernel's ALiBi (FA_VAR_CAP) does not reach. Only with the counter's scratch (or
     * forced): without it the walk is a fixed one, 5-13 % slower at d = 128 (bench/LOG.md,
     * 2026-12-07-seventh), and the plain grids run the call. sm90_long_tile forced on: the walk on
     * the 3-consumer 80-key tile (not timed on it yet). */
    if constexpr (EXTRA != SM90_ALIBI) {
        if (fa_plan_sm90_causal_counter(p, o) && p->Nq + p->Nk <= INT32_MAX - 256   /* the variant kernel's bound */
            && (need != NULL || o->sm90_grid == 4 || (scratch != NULL && scratch_bytes >= sizeof(int)))) {
            fa_variants none;
            memset(&none, 0, sizeof none);
            const fa_variants *vv = v != NULL ? v : &none;
#define FA_SM90_WALK(tile)                                                                                     \
    (bf16 ? sm90_launch<__nv_bfloat16, tile, FA_VAR_MASKS, true>(p, o, scratch, scratch_bytes, need, stream, vv) \
          : sm90_launch<__half, tile, FA_VAR_MASKS, true>(p, o, scratch, scratch_bytes, need, stream, vv))
            if (o->sm90_long_tile == 2)
                return FA_SM90_WALK(sm90_tile_d128_long);
#if FA_SM90_WALK_FENCE                                  /* tiles.h: a tools build's */
            return FA_SM90_WALK(sm90_tile_d128_causal_long);
#else
            return FA_SM90_WALK(sm90_tile_d128);
#endif
#undef FA_SM90_WALK
        }
    }
    if (sm90_d64_short(p, o, v))
        return FA_SM90_LAUNCH(sm90_tile_d64_short);
    if (p->d <= 64)
        return FA_SM90_LAUNCH(sm90_tile_d64);
    if (sm90_long_tile(p, o))
        return FA_SM90_LAUNCH(sm90_tile_d128_long);
    if (p->d <= 128 && p->causal && p->Nk >= FA_SM90_FENCE_NK)
        return FA_SM90_LAUNCH(sm90_tile_d128_causal_long);
    if (p->d <= 128)
        return FA_SM90_LAUNCH(sm90_tile_d128);
    return FA_SM90_LAUNCH(sm90_tile_d256);
#undef FA_SM90_LAUNCH
}

/* The staged attn_mask reads 64-key panels: a tile of another key width (a tool's variant) has no
 * staged kernel, and its calls read the mask per score. */
template <typename T, class C>
static int sm90_launch_staged(const fa_params *p, const fa_overrides *o, size_t *need, cudaStream_t stream,
                              const fa_variants *v)
{
    if constexpr (C::BN % 64 == 0)
        return sm90_launch<T, sm90_tile_mask<C>, FA_VAR_ALL>(p, o, NULL, 0, need, stream, v);
    else
        return FA_ERR_UNSUPPORTED;
}

/* The plain kernels' EXTRA for v, or −1 where they cannot run it: v leaves the plain problem as it
 * is (no window, softcap, key_mask, attn_mask or packed sequences; an alignment that moves no key:
 * top-left, or bottom-right where δ = Nk − Nq = 0 or, without ALiBi, the call is not causal) but
 * for sinks (SM90_SINK) or ALiBi (SM90_ALIBI), not both, ALiBi with a scale from 1e-6 (its term
 * goes into the scores' units as slope / scale, bounded by 2^96). */
static int sm90_plain_extra(const fa_params *p, const fa_variants *v)
{
    const int alibi = v->alibi_slopes != NULL;
    if (v->window || v->softcap != 0.f || v->key_mask != NULL || v->mask != NULL || v->cu_seqlens_q != NULL
        || (alibi && v->sinks != NULL) || (alibi && p->scale < 1e-6f))
        return -1;
    if (v->align != FA_ALIGN_TOP_LEFT && p->Nq != p->Nk && (p->causal || alibi))
        return -1;
    return alibi ? SM90_ALIBI : v->sinks != NULL ? SM90_SINK : 0;
}

/* A call with variants (fa.h). Sinks alone, ALiBi alone (or no variant at all) run on the plain
 * tiles (sm90_plain_extra). The kernel with every variant (FA_VAR_ALL: an attn_mask, with a softcap or
 * ALiBi too) runs 2 consumers at every width: 3 consumers' 160 registers leave no room for
 * the per-score state. The visibility variants alone (FA_VAR_MASKS) take the plain kernel's tiles:
 * 3 consumers at d = 64 (but short causal calls), and at d <= 128 for non-causal calls from
 * FA_SM90_LONG_NK keys. A softcap or ALiBi without attn_mask (FA_VAR_CAP: its block loop 1406 SASS
 * instructions at d = 128, FA_VAR_ALL's 3225; ALiBi there +4–6 % at d = 128, +15 % at d = 64,
 * bench/LOG.md 2026-12-04-alibi) takes 3 consumers at d = 64 as they do (+4.6 % on 4k keys,
 * 2026-12-04-softcap) and 2 at d = 128 (3 on 80-key blocks: −0.5 %; 2 on 176-key blocks: −1.6 to
 * −10.5 %, 2026-12-07) and 256.
 * Packed sequences (never with attn_mask or key_mask) run the same tiles' PACKED kernels, a CTA per
 * SM taking the sequences' query tiles from a counter in the scratch (packed_find), and so do the
 * unpacked calls fa_plan_sm90_counter picks (causal windows at d = 64, and at d = 128 past
 * FA_SM90_PERSISTENT_CAUSAL_KEYS keys or where the snake would be uneven), as B sequences. need != NULL:
 * only the scratch the call would use is returned in *need (sm90_launch). */
static int sm90_dispatch_variants(const fa_params *p, const fa_variants *v, const fa_overrides *o, void *scratch,
                                  size_t scratch_bytes, size_t *need, cudaStream_t stream)
{
    switch (sm90_plain_extra(p, v)) {
    case 0:
        return sm90_dispatch<0>(p, o, scratch, scratch_bytes, need, stream);
    case SM90_SINK:
        return sm90_dispatch<SM90_SINK>(p, o, scratch, scratch_bytes, need, stream, v);
    case SM90_ALIBI:
        return sm90_dispatch<SM90_ALIBI>(p, o, scratch, scratch_bytes, need, stream, v);
    }
    if (p->dtype == FA_FLOAT32 || p->scale < 0.f || p->Nk < 1 || p->Nq + p->Nk > INT32_MAX - 256
        || p->B > INT32_MAX || p->Hq > INT32_MAX)
        return FA_ERR_UNSUPPORTED;
    const int bf16 = p->dtype == FA_BFLOAT16;
    const int all = v->softcap > 0.f || v->alibi_slopes != NULL || v->mask != NULL;
    /* A float mask of q's dtype with adjacent keys and rows: through shared memory where TMA can
     * read it (else, or if the map cannot be built, each thread reads its scores' entries). */
    const int staged = v->mask != NULL && v->mask_kind == FA_MASK_ADD && v->mask_col_stride == 1
                    && v->mask_row_stride > 0 && v->cu_seqlens_q == NULL;
    int dev = 0;
    fa_device info;
    const int st_dev = fa_device_current(&dev, &info);
    if (st_dev != FA_OK)
        return st_dev;
    const bool packed = v->cu_seqlens_q != NULL,
               walk = packed || fa_plan_sm90_counter(p, v, o, info.sms, sm90_tile_d128::BM, sm90_tile_d128::BN);
#define FA_SM90_VAR_LAUNCH_AS(tile, kind, pk)                                                       \
    (bf16 ? sm90_launch<__nv_bfloat16, tile, kind, pk>(p, o, scratch, scratch_bytes, need, stream, v) \
          : sm90_launch<__half, tile, kind, pk>(p, o, scratch, scratch_bytes, need, stream, v))
#define FA_SM90_VAR_LAUNCH(tile, kind)                                                              \
    (walk ? FA_SM90_VAR_LAUNCH_AS(tile, kind, true) : FA_SM90_VAR_LAUNCH_AS(tile, kind, false))
    if (all && v->mask == NULL) {                   /* softcap, ALiBi, no attn_mask: FA_VAR_CAP */
        if (sm90_d64_short(p, o, v))
            return FA_SM90_VAR_LAUNCH(sm90_tile_d64_short, FA_VAR_CAP);
        if (p->d <= 64)
            return FA_SM90_VAR_LAUNCH(sm90_tile_d64, FA_VAR_CAP);
        if (p->d <= 128)
            return FA_SM90_VAR_LAUNCH(sm90_tile_d128, FA_VAR_CAP);
        return FA_SM90_VAR_LAUNCH(sm90_tile_d256, FA_VAR_CAP);
    }
    if (all) {                                      /* attn_mask: never packed (fa_check_variants) */
        int st = FA_ERR_UNSUPPORTED;
        if (p->d <= 64) {
            if (staged)
                st = bf16 ? sm90_launch_staged<__nv_bfloat16, sm90_tile_d64_short>(p, o, need, stream, v)
                        : sm90_launch_staged<__half, sm90_tile_d64_short>(p, o, need, stream, v);
            return st != FA_ERR_UNSUPPORTED ? st : FA_SM90_VAR_LAUNCH_AS(sm90_tile_d64_short, FA_VAR_ALL, false);
        }
        if (p->d <= 128) {
            if (staged)
                st = bf16 ? sm90_launch_staged<__nv_bfloat16, sm90_tile_d128>(p, o, need, stream, v)
                        : sm90_launch_staged<__half, sm90_tile_d128>(p, o, need, stream, v);
            return st != FA_ERR_UNSUPPORTED ? st : FA_SM90_VAR_LAUNCH_AS(sm90_tile_d128, FA_VAR_ALL, false);
        }
        return FA_SM90_VAR_LAUNCH_AS(sm90_tile_d256, FA_VAR_ALL, false);
    }
    if (sm90_d64_short(p, o, v))
        return FA_SM90_VAR_LAUNCH(sm90_tile_d64_short, FA_VAR_MASKS);
    if (p->d <= 64)
        return FA_SM90_VAR_LAUNCH(sm90_tile_d64, FA_VAR_MASKS);
    if (sm90_long_tile(p, o))
        return FA_SM90_VAR_LAUNCH(sm90_tile_d128_long, FA_VAR_MASKS);
    if (p->d <= 128)
        return FA_SM90_VAR_LAUNCH(sm90_tile_d128, FA_VAR_MASKS);
    return FA_SM90_VAR_LAUNCH(sm90_tile_d256, FA_VAR_MASKS);
#undef FA_SM90_VAR_LAUNCH
#undef FA_SM90_VAR_LAUNCH_AS
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
                                        void *scratch, size_t scratch_bytes, cudaStream_t stream)
{
    return sm90_dispatch_variants(p, v, o, scratch, scratch_bytes, NULL, stream);
}

extern "C" int fa_sm90_variants_scratch_bytes(const fa_params *p, const fa_variants *v, const fa_overrides *o,
                                              size_t *bytes)
{
    *bytes = 0;
    const int status = sm90_dispatch_variants(p, v, o, NULL, 0, bytes, NULL);
    if (status != FA_OK)
        *bytes = 0;
    return status;
}

extern "C" int fa_sm90_scratch_bytes(const fa_params *p, const fa_overrides *o, size_t *bytes)
{
    *bytes = 0;
    const int status = sm90_dispatch(p, o, NULL, 0, bytes, NULL);
    if (status != FA_OK)
        *bytes = 0;
    return status;
}
