/*
 * decode.cuh — what the split-KV decode files share (decode.cu: the tensor-core attend kernel and
 * the host planner; decode_simt.cu: append, the CUDA-core attend kernel and the combine kernels):
 * the kernel arguments and the device helpers every kernel uses.
 */
#ifndef FA_DECODE_CUH
#define FA_DECODE_CUH

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "families.h"
#include "fa_variant.h"
#include "plan.h"
#include "dtype.cuh"
#include "ptx.cuh"
#include "softmax.cuh"

/* Each warp of the tensor-core attend kernel takes runs of this many adjacent 16-key blocks (run r
 * of the chunk to warp r % WARPS): 64 keys, 16 KB of K and V at d = 128. Same call, H200
 * (bench/LOG.md, 2026-11-30, bench/log/2026-11-30-decode-stages-runs/decode_sweep_run.txt), 4 against 1: zero fill B = 1 H 32/32 4k
 * 2.35 → 2.47 TB/s, 1k 1.03 → 1.17, B = 8 H 32/8 4k 3.06 → 3.11; read flush B = 8 H 32/8 4k
 * 3.38 → 3.44; the table's larger caches within ±1 % either way. */
#define DECODE_RUN 4

/* Kernel arguments: the caller's params plus the plan and scalars derived once on the host. */
typedef struct {
    fa_kvcache_params kp;
    float scale_log2;        /* scale · log2(e), signed */
    int G;                   /* Hq / Hkv */
    int R;                   /* Nq · G packed query rows per KV head */
    int row_tiles;           /* ceil(R / 16): tensor-core CTAs per (split, b, hk) */
    int64_t nnew;            /* appended rows: Nnew, 0 without k_new */
    int64_t rows;            /* B · Hq · Nq output rows, index (b·Hq + h)·Nq + i */
    int64_t splits, chunk;   /* split s reads keys [s·chunk, (s+1)·chunk); chunk % 64 == 0 */
    float *o_part;           /* (splits, rows, d) fp32, O / l of each split (splits > 1) */
    float *lse_part;         /* (splits, rows) fp32, log2 units, −inf: the split saw no key */
    int vec_kv;              /* k, v caches: 16-byte aligned rows, cp.async */
    int vec_q;               /* q: 16-byte aligned rows */
    int vec_append;          /* append rows: 16-byte aligned and whole */
    int combine_wide;        /* combine: 0, one thread per output element (fa_decode_combine_kernel);
                                1, four warps per output row (fa_decode_combine_wide_kernel) */
    int cluster;             /* sm_90, tensor-core kernel: the splits of a row tile form one thread
                                block cluster and merge through distributed shared memory (no
                                partials in global memory, no combine kernel); 0: off */
    int evict_first;         /* tensor-core attend: the K/V copies of whole blocks carry an L2
                                evict-first policy (1) or none (0) */
    /* The variants (fa_forward_kvcache_variants_cuda; the VAR attend kernels, bottom-right about
     * δ = L_b − Nq): ALiBi and sinks from v, the window's sides with causal folded in (right 0;
     * −1 unbounded), softcap c as cap_c = c · log2 e and cap_in = scale / c (cap_c 0: none). The
     * combine kernels and the writers of finished rows read v.sinks (NULL without variants). */
    fa_variants v;
    int var_left, var_right;
    float cap_c, cap_in;
    int win_base;            /* the window bounds the keys: split s reads [lo + s·chunk, + chunk), lo
                                the tile's first row's first key (known once cache_seqlens is read) */
} decode_args;

/* ---- Shared by every kernel ----------------------------------------------------------------- */

/* Holds x in a register from here on: the compiler cannot recompute it inside a loop (it would
 * rebuild shared-memory addresses from the CTA's window base every iteration otherwise). */
__device__ __forceinline__ void keep_in_register(uint32_t &x)
{
    asm volatile("" : "+r"(x));
}

/* Thread block clusters (sm_90): this CTA's rank, a barrier over every thread of the cluster
 * (release / acquire: shared-memory writes before it are visible to the cluster's loads after it),
 * and a float load from the shared memory of CTA `rank` at the address of `p` in this one. */
__device__ __forceinline__ int cluster_rank(void)
{
    uint32_t r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
    return (int)r;
}

__device__ __forceinline__ void cluster_sync(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

/* The most splits merged inside one thread block cluster: the portable cluster size. Larger
 * (non-portable) clusters of 12 and 16 were slower than the combine kernel on the H200
 * (B = 1 H 32/8 128k: 3.44 and 3.57 TB/s against 3.88 and 3.95; bench/LOG.md, 2026-11-30). */
#define MAX_CLUSTER 8

__device__ __forceinline__ float ld_cluster_f32(const float *p, int rank)
{
    float v = 0.f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_u32(p)), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(remote) : "memory");
#endif
    return v;
}

/* cache_seqlens[b] before the append (default Nmax − Nnew). */
__device__ __forceinline__ int64_t seq_start(const decode_args &a, int64_t b)
{
    return a.kp.cache_seqlens != NULL ? (int64_t)a.kp.cache_seqlens[b] : a.kp.p.Nk - a.nnew;
}

/* Whether every cache_seqlens[b] + Nnew lies in 0..Nmax. A CTA-wide barrier: every thread of the
 * CTA calls it, before any early return. B is small; the entries sit in L2 after the first CTA. */
static __device__ bool seqlens_valid(const decode_args &a)
{
    int bad = 0;
    if (a.kp.cache_seqlens != NULL)
        for (int64_t b = threadIdx.x; b < a.kp.p.B; b += blockDim.x) {
            const int64_t n = a.kp.cache_seqlens[b];
            bad |= n < 0 || n + a.nnew > a.kp.p.Nk;
        }
    return !__syncthreads_or(bad);
}

/* A finished row of head h with a sink (a.v.sinks): its O (already / l) and lse2 (log2 units; −inf:
 * no key, NaN: bad cache_seqlens) become those of the denominator with 2^(sinks[h] · log2 e) added
 * (fa_row_end on a row whose max is lse2 and sum 1). */
__device__ __forceinline__ void decode_sink(const decode_args &a, int64_t h, float &val, float &lse2)
{
    float mul;
    fa_row_end(lse2, lse2 == -INFINITY ? 0.f : 1.f, 1, a.v.sinks[h] * FA_LOG2E, &mul, &lse2);
    val *= mul;                                         /* NaN stays NaN */
}

/* Stores one finished element: O (natural-log lse) to the output when the launch has one split
 * (VAR: with its sink), else the split's partials. lse2 in log2 units; row = (b·Hq + h)·Nq + i. */
template <typename T, bool VAR = false>
__device__ __forceinline__ void store_result(const decode_args &a, int64_t split, int64_t row, int64_t b,
                                             int64_t h, int64_t i, int c, float val, float lse2)
{
    const fa_params &p = a.kp.p;
    if (a.splits == 1) {
        if (VAR && a.v.sinks != NULL)
            decode_sink(a, h, val, lse2);
        from_float((T *)p.o + b * p.o_batch_stride + h * p.o_head_stride + i * p.o_row_stride + c, val);
        if (c == 0 && p.lse != NULL)
            p.lse[row] = lse2 * FA_LN2;
    } else {
        a.o_part[(split * a.rows + row) * p.d + c] = val;
        if (c == 0)
            a.lse_part[split * a.rows + row] = lse2;
    }
}

/* The element combine kernel's threads per output row (d rounded up to 32, 64 or 128); its
 * launch takes 128 / combine_tpr(d) rows per CTA. */
__host__ __device__ __forceinline__ int combine_tpr(int d)
{
    return d <= 32 ? 32 : d <= 64 ? 64 : 128;
}

typedef void (*decode_kernel)(const decode_args);

/* decode_simt.cu: the append kernel, and for each dtype the CUDA-core attend kernel and the two
 * combine kernels (one thread per output element; four warps per output row), each also with sinks. */
typedef struct {
    decode_kernel attend, combine, combine_wide;
    decode_kernel combine_sinks, combine_wide_sinks;   /* the same with the sinks of a.v */
} decode_simt_kernels;

decode_kernel decode_append_kernel_ptr(void);
decode_simt_kernels decode_simt_kernels_for(fa_dtype dtype);

template <typename T>
constexpr fa_dtype decode_dtype()
{
    return sizeof(T) == 4 ? FA_FLOAT32 : __is_same(T, __half) ? FA_FLOAT16 : FA_BFLOAT16;
}

#endif /* FA_DECODE_CUH */
