/*
 * ptx_sm90.cuh — Hopper PTX wrappers for sm90.cu (sm_90a device code only): mbarriers, TMA loads
 * and stores, wgmma shared-memory descriptors, fences and named barriers; the wgmma instructions
 * themselves are in wgmma.cuh (generated); on the host, the tensor maps TMA reads (make_map).
 */
#ifndef FA_PTX_SM90_CUH
#define FA_PTX_SM90_CUH

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "wgmma.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void mbar_init(uint64_t *bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(smem_u32(bar)), "r"(count) : "memory");
}

/* The producer's arrival: the phase completes when `bytes` of TMA data have also landed. */
__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                 :: "r"(smem_u32(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(smem_u32(bar)) : "memory");
}

/* Waits for the completion of the barrier's phase of the given parity. A fresh barrier counts
 * its phase "before 0" (parity 1) as complete, so the first wait on an empty ring passes. */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
    } while (!done);
}

/* mbar_wait for a thread with nothing else to do (a producer): each poll suspends the thread until
 * the phase completes or the hint (10 ms, in ns) passes, so its warp takes no issue slots from the
 * warps beside it on its scheduler. */
__device__ __forceinline__ void mbar_wait_sleep(uint64_t *bar, uint32_t parity)
{
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(smem_u32(bar)), "r"(parity), "r"(10000000u) : "memory");
    } while (!done);
}

/* TMA: box (col, row, head, batch) of the tensor map into shared memory, completing on bar. */
__device__ __forceinline__ void tma_load(void *dst, const CUtensorMap *map, int col, int row,
                                         int head, int batch, uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3, %4, %5}], [%6];\n"
                 :: "r"(smem_u32(dst)), "l"(map), "r"(col), "r"(row), "r"(head), "r"(batch),
                    "r"(smem_u32(bar)) : "memory");
}

/* TMA store of a box from shared memory; rows and columns past the tensor's end are dropped. */
__device__ __forceinline__ void tma_store(const CUtensorMap *map, const void *src, int col, int row,
                                          int head, int batch)
{
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n"
                 :: "l"(map), "r"(col), "r"(row), "r"(head), "r"(batch), "r"(smem_u32(src)) : "memory");
}

/* wgmma descriptor of a 128-byte-swizzled operand: start address, LBO (bytes between 64-column
 * panels; read only for MN-major operands) and SBO = 1024 (bytes between groups of 8 rows). */
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t addr, uint32_t lbo)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | (uint64_t)(lbo >> 4) << 16
         | (uint64_t)(1024 >> 4) << 32 | (uint64_t)1 << 62;
}

/* The descriptor of addr + off from addr's: the start address field (bits 0-13, in 16-byte
 * units) gains off / 16, which cannot carry out while addr + off stays below 256 KB of shared
 * memory (the H200 has 228 KB). One base descriptor per operand, one add per k-step. */
__device__ __forceinline__ uint64_t desc_at(uint64_t desc, uint32_t off)
{
    return (desc >> 32) << 32 | (uint32_t)((uint32_t)desc + (off >> 4));
}

__device__ __forceinline__ void wgmma_fence(void)
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit(void)
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void wgmma_wait(void)
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}

/* Ties accumulator registers to this point, so that no read of them is scheduled before the
 * wgmma.wait_group that makes them valid. */
template <int N>
__device__ __forceinline__ void reg_fence(float (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(r[i]) :: "memory");
}

template <int M, int N>
__device__ __forceinline__ void reg_fence_u(uint32_t (&r)[M][N])
{
#pragma unroll
    for (int i = 0; i < M; i++)
#pragma unroll
        for (int j = 0; j < N; j++)
            asm volatile("" : "+r"(r[i][j]) :: "memory");
}

/* acc = A Bᵀ (64 × N) over D columns, one commit group (no fence: the caller's): A's 64 rows at s_a
 * and B's N rows at s_b, both K-major tiles of 64-column panels A_PANEL and B_PANEL bytes apart,
 * D/16 wgmmas of 32 bytes each down the panels. The forward's S = Q Kᵀ, the backward's Sᵀ = K Qᵀ and
 * dPᵀ = V dOᵀ. ONTO: the products are added to acc's values (else acc starts from zero). Completes
 * at a later wgmma_wait. */
template <typename T, int D, int N, int A_PANEL, int B_PANEL, bool ONTO = false>
__device__ __forceinline__ void issue_ab_t(float (&acc)[N / 2], uint32_t s_a, uint32_t s_b)
{
    const uint64_t d_a = wgmma_desc(s_a, 16), d_b = wgmma_desc(s_b, 16);
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        const uint32_t off_a = (kk / 4) * A_PANEL + (kk % 4) * 32;
        const uint32_t off_b = (kk / 4) * B_PANEL + (kk % 4) * 32;
        wgmma_ss<N, T>(acc, desc_at(d_a, off_a), desc_at(d_b, off_b), ONTO || kk > 0);
    }
    wgmma_commit();
}

/* An accumulator (64 × N) as wgmma A fragments: column tiles 2kk, 2kk+1 of the accumulator layout
 * are exactly the A fragment of k-step kk (a0 = (g, 2t..), a1 = (g+8, 2t..), a2, a3 = 8 columns on). */
template <typename T, int N>
__device__ __forceinline__ void pack_frags(uint32_t (&r)[N / 16][4], const float (&x)[N / 2])
{
#pragma unroll
    for (int kk = 0; kk < N / 16; kk++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            r[kk][e] = pack2<T>(x[8 * kk + 2 * e], x[8 * kk + 2 * e + 1]);
}

/* Barrier over one consumer warpgroup (ids 1..3; 0 is __syncthreads). */
__device__ __forceinline__ void warpgroup_bar(int id)
{
    asm volatile("bar.sync %0, 128;\n" :: "r"(id) : "memory");
}

/* Ping-pong turns (ids 4..6, one per consumer): a consumer waits at its own barrier until the
 * previous consumer has arrived there, i.e. has issued its wgmmas. */
__device__ __forceinline__ void turn_wait(int cw)
{
    asm volatile("bar.sync %0, 256;\n" :: "r"(4 + cw) : "memory");
}

__device__ __forceinline__ void turn_pass(int next_cw)
{
    asm volatile("bar.arrive %0, 256;\n" :: "r"(4 + next_cw) : "memory");
}

#endif /* sm_90a */
/* ---- Tensor maps (host) ------------------------------------------------------------------- */

/* cuTensorMapEncodeTiled from the driver, looked up once (no link against libcuda). */
static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled(void)
{
    static PFN_cuTensorMapEncodeTiled_v12000 fn;
    static int looked_up;
    if (!__atomic_load_n(&looked_up, __ATOMIC_ACQUIRE)) {
        void *ptr = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &q)
                != cudaSuccess || q != cudaDriverEntryPointSuccess)
            ptr = nullptr;
        __atomic_store_n(&fn, (PFN_cuTensorMapEncodeTiled_v12000)ptr, __ATOMIC_RELAXED);
        __atomic_store_n(&looked_up, 1, __ATOMIC_RELEASE);
    }
    return fn;
}

/* A 4-D tensor map over x[b, h, n, 0..d) (strides in elements) with boxes of 64 columns × rows,
 * 128-byte swizzle, zero fill out of bounds. TMA needs 16-byte aligned base and strides; a size-1
 * dimension's stride is never used, so it is replaced by a legal one. Returns 0 on success. */
static int make_map(CUtensorMap *map, int bf16, const void *x, int64_t B, int64_t H, int64_t N, int64_t d,
                    int64_t batch_stride, int64_t head_stride, int64_t row_stride, int rows)
{
    PFN_cuTensorMapEncodeTiled_v12000 encode = encode_tiled();
    const int64_t strides[3] = {row_stride, head_stride, batch_stride}, sizes[3] = {N, H, B};
    cuuint64_t dims[4] = {(cuuint64_t)d, (cuuint64_t)N, (cuuint64_t)H, (cuuint64_t)B};
    cuuint64_t bytes[3];
    if (encode == nullptr || (uintptr_t)x % 16 != 0)
        return 1;
    for (int i = 0; i < 3; i++) {
        bytes[i] = (cuuint64_t)(sizes[i] == 1 ? 16 : 2 * strides[i]);
        if (sizes[i] > 1 && (strides[i] <= 0 || strides[i] % 8 != 0))
            return 1;
    }
    const cuuint32_t box[4] = {64, (cuuint32_t)rows, 1, 1}, unit[4] = {1, 1, 1, 1};
    return encode(map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
                  const_cast<void *>(x), dims, bytes, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS;
}

#endif /* FA_PTX_SM90_CUH */
