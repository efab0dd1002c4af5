/*
 * ptx.cuh — PTX wrappers shared by the kernels (sm80.cu, sm80_backward.cu, decode.cu, fp32tc.cu,
 * fp32.cu, turing.cu; sm90.cu uses the address, ex2 and packing ones): cp.async, the 16-bit and
 * fp32 row-tile loads, the 4-column loads, ldmatrix, mma.m16n8k16, the (row mod 8) XOR swizzle of 16-byte chunks in
 * shared tiles; and the host side of launching the one-CTA-per-tile kernels (sm80.cu,
 * fp32tc.cu, turing.cu).
 * Include from .cu files only.
 */
#ifndef FA_MMA_CUH
#define FA_MMA_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "families.h"

/* ---- PTX wrappers ------------------------------------------------------------------------- */

__device__ __forceinline__ uint32_t smem_u32(const void *ptr)
{
    return (uint32_t)__cvta_generic_to_shared(ptr);
}

/* Byte offset of chunk c (8 elements) of row r in a swizzled tile with D columns. */
template <int D>
__device__ __forceinline__ uint32_t swz(int r, int c)
{
    return (uint32_t)(r * D * 2 + ((c ^ (r % 8)) << 4));
}

/* Address for ldmatrix.x4 of the 16×16 block at rows r0.., chunks c0, c0+1 (r0 % 8 == 0, c0
 * even), from lane_off = swz<D>(row, chunk) of the lane's row 0..15 and chunk 0 or 1 in the
 * block. The swizzle only flips bits 4-6 of the offset, so c0's low chunk bits XOR into
 * lane_off and the rest is an immediate. */
template <int D>
__device__ __forceinline__ uint32_t frag_addr(uint32_t tile, uint32_t lane_off, int r0, int c0)
{
    return tile + r0 * D * 2 + (c0 & ~7) * 16 + (lane_off ^ ((c0 & 7) << 4));
}

/* 16-byte async copy; bytes < 16 zero-fills the rest of the chunk (0: all zeros). */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(bytes) : "memory");
}

/* 16-byte async copy of a whole chunk. */
__device__ __forceinline__ void cp_async16_full(uint32_t dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(src) : "memory");
}

/* 16-byte async copy of a whole chunk under an L2 cache policy (createpolicy). */
__device__ __forceinline__ void cp_async16_hint(uint32_t dst, const void *src, uint64_t policy)
{
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "l"(policy) : "memory");
}

/* Columns c..c+3 of an fp32 row at src (= the row + c) into x; those at or past d keep x's
 * value. vec: 16-byte aligned rows, so a whole group is one 16-byte load. */
__device__ __forceinline__ void load_f32x4(float4 &x, const float *src, int c, int d, int vec)
{
    if (vec && c + 4 <= d) {
        x = __ldg((const float4 *)src);
    } else {
        if (c + 0 < d) x.x = src[0];
        if (c + 1 < d) x.y = src[1];
        if (c + 2 < d) x.z = src[2];
        if (c + 3 < d) x.w = src[3];
    }
}

/* 4-byte async copy (any fp32 address); bytes 0 writes a zero. */
__device__ __forceinline__ void cp_async4(uint32_t dst, const void *src, int bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(dst), "l"(src), "r"(bytes) : "memory");
}

/* Rows [0, ROWS) of a (rows, d) fp32 block g (row stride in elements) into the shared tile s
 * (byte address, rows of LD floats), asynchronously, by NT threads. Rows ≥ n_valid and columns
 * ≥ d are zero-filled (a zero-byte cp.async still writes its 16 or 4 bytes of zeros), so padded
 * keys and columns add 0. vec: g's rows are 16-byte aligned, so one 16-byte copy per 4 columns
 * (a partial last chunk reads only its valid bytes); else one per float. */
template <int ROWS, int LD, int D, int NT, typename Count>     /* Count: int or int64_t, the caller's */
__device__ __forceinline__ void load_rows_f32(uint32_t s, const float *g, int64_t row_stride,
                                              Count n_valid, int d, bool vec)
{
    static_assert(ROWS * D % (4 * NT) == 0, "whole 16-byte chunks per thread");
    if (NT % (D / 4) == 0 && vec && n_valid >= ROWS && d == D) {
        /* Whole tile: this thread's chunks are one column of rows r0 + i·STEP (the mapping
         * below), so one pointer walks them. */
        constexpr int CH = D / 4, STEP = NT % CH == 0 ? NT / CH : 1;
        const int r0 = threadIdx.x / CH, c = threadIdx.x % CH * 4;
        const float *src = g + r0 * row_stride + c;
        const int64_t step = STEP * row_stride;
#pragma unroll
        for (int i = 0; i < ROWS * D / 4 / NT; i++, src += step)
            cp_async16_full(s + 4 * ((r0 + i * STEP) * LD + c), src);
        return;
    }
    if (vec) {
#pragma unroll
        for (int i = 0; i < ROWS * D / 4 / NT; i++) {
            const int idx = threadIdx.x + i * NT;
            const int r = idx / (D / 4), c = idx % (D / 4) * 4;
            const int n = r < n_valid && c < d ? min(4, d - c) : 0;
            cp_async16(s + 4 * (r * LD + c), n ? g + r * row_stride + c : g, 4 * n);
        }
    } else {
#pragma unroll 4
        for (int i = 0; i < ROWS * D / NT; i++) {
            const int idx = threadIdx.x + i * NT;
            const int r = idx / D, c = idx % D;
            const int n = r < n_valid && c < d ? 4 : 0;
            cp_async4(s + 4 * (r * LD + c), n ? g + r * row_stride + c : g, n);
        }
    }
}

__device__ __forceinline__ void cp_async_commit(void)
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Waits until at most N of this thread's committed groups are still in flight. */
template <int N>
__device__ __forceinline__ void cp_async_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

/* Four 8×8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, register i gets
 * matrix i with (row lane/4, cols 2·(lane%4), +1) in this lane — or, with .trans, the element
 * pair (rows 2·(lane%4), +1; col lane/4). */
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_trans(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t x)
{
    asm volatile("st.shared.b32 [%0], %1;\n" :: "r"(addr), "r"(x) : "memory");
}

__device__ __forceinline__ void st_shared_v4(uint32_t addr, uint4 x)
{
    asm volatile("st.shared.v4.b32 [%0], {%1,%2,%3,%4};\n"
                 :: "r"(addr), "r"(x.x), "r"(x.y), "r"(x.z), "r"(x.w) : "memory");
}

/* The first n (0..8) 16-bit elements at src, by 2-byte loads (any alignment), zero-padded to one
 * 16-byte chunk: the gather for rows that cp.async cannot take. */
__device__ __forceinline__ uint4 load_chunk8(const uint16_t *src, int n)
{
    uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int e = 0; e < 8; e++)
        if (e < n)
            w[e / 2] |= (uint32_t)src[e] << (16 * (e % 2));
    return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr)
{
    uint4 x;
    asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(x.x), "=r"(x.y), "=r"(x.z), "=r"(x.w) : "r"(addr) : "memory");
    return x;
}

/* Copies rows 0..ROWS-1, columns 0..D-1 of a global tile into a swizzled shared tile; rows >= rows
 * and columns >= d are zero-filled. vec: rows are 16-byte aligned, so cp.async moves 16-byte
 * chunks (a partial last chunk reads only its valid bytes); else plain 2-byte loads, stored at
 * once, which the next __syncthreads publishes like a finished cp.async group. */
template <int ROWS, int D, int THREADS, bool WHOLE>
__device__ __forceinline__ void load_tile(uint32_t s_tile, const uint16_t *g, int64_t row_stride,
                                          int rows, int d, int vec)
{
    constexpr int CHUNKS = D / 8;                       /* 16-byte chunks per row */
    constexpr int STEP = THREADS / CHUNKS;              /* rows covered by one pass of the CTA */
    static_assert(THREADS % CHUNKS == 0 && ROWS % STEP == 0, "tile must split evenly over threads");
    const int c = threadIdx.x % CHUNKS;                 /* this thread's chunk in every row */
    const int nc = max(0, min(8, d - 8 * c));           /* its valid elements in a valid row */
    if (WHOLE && vec && rows >= ROWS && d == D) {
        /* Whole tile: this thread's chunks are column c of rows r0 + i·STEP, so one pointer
         * walks them, and their swizzled places repeat every 2 steps (the swizzle reads r % 8). */
        static_assert((2 * STEP) % 8 == 0, "swizzle period");
        const int r0 = threadIdx.x / CHUNKS;
        const uint16_t *src = g + r0 * row_stride + 8 * c;
        const int64_t step = STEP * row_stride;
        const uint32_t s0 = s_tile + swz<D>(r0, c), s1 = s_tile + swz<D>(r0 + STEP, c) - STEP * D * 2;
#pragma unroll
        for (int i = 0; i < ROWS / STEP; i++, src += step)
            cp_async16_full((i % 2 ? s1 : s0) + i * STEP * D * 2, src);
        return;
    }
    if (vec) {
#pragma unroll
        for (int i = 0; i < ROWS / STEP; i++) {
            const int r = threadIdx.x / CHUNKS + i * STEP;
            const int n = r < rows ? nc : 0;
            cp_async16(s_tile + swz<D>(r, c), n ? g + r * row_stride + 8 * c : g, 2 * n);
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < ROWS / STEP; i++) {
        const int r = threadIdx.x / CHUNKS + i * STEP;
        const int n = r < rows ? nc : 0;
        const uint16_t *src = n ? g + r * row_stride + 8 * c : g;
        uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
        for (int e = 0; e < 8; e++)
            if (e < n)
                w[e / 2] |= (uint32_t)src[e] << (16 * (e % 2));
        st_shared_v4(s_tile + swz<D>(r, c), make_uint4(w[0], w[1], w[2], w[3]));
    }
}

/* C += A B, m16n8k16, fp32 accumulate. A 16×16 row-major: a0 (g, 2t..), a1 (g+8, 2t..),
 * a2 (g, 2t+8..), a3 (g+8, 2t+8..); B 16×8 col-major: b0 (k 2t.., n g), b1 (k 2t+8.., n g);
 * C 16×8: c0,c1 (g, 2t..2t+1), c2,c3 (g+8, 2t..2t+1); g = lane/4, t = lane%4. */
template <typename T>
__device__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma16816<__half>(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* 2^x on the SFU (relative error ~2^-22, subnormal results flushed: they only feed sums of
 * terms >= 1); −inf gives +0. exp2f would add a subnormal-range fix-up per element. */
__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* Rounds (lo, hi) to a packed pair; lo is the lower column, in the low 16 bits. */
template <typename T>
__device__ uint32_t pack2(float lo, float hi);

template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi)
{
    __half2 x = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&x);
}

template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi)
{
    __nv_bfloat162 x = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&x);
}

/* One warp's ROWS staged output rows (swizzled, D columns, at shared address s_rows) to o rows
 * row0.. of g_o (row stride in elements): 16-byte stores where vec (aligned rows) and the chunk is
 * whole, else element by element; rows at or past Nq and columns at or past d are not written. The
 * caller's __syncwarp() makes the other lanes' staged chunks visible first. */
template <int D, int ROWS>
__device__ __forceinline__ void store_o_rows(uint32_t s_rows, uint16_t *g_o, int row0, int Nq, int d,
                                             int64_t row_stride, int vec)
{
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < ROWS * (D / 8) / 32; i++) {
        const int idx = lane + 32 * i;
        const int r = idx / (D / 8), ch = idx % (D / 8);
        const int row = row0 + r, n = min(8, d - 8 * ch);
        if (row >= Nq || n <= 0)
            continue;
        const uint4 x = ld_shared_v4(s_rows + swz<D>(r, ch));
        uint16_t *dst = g_o + row * row_stride + 8 * ch;
        if (vec && n == 8) {
            *reinterpret_cast<uint4 *>(dst) = x;
        } else {
            const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
            for (int e = 0; e < 8; e++)
                if (e < n)
                    dst[e] = (uint16_t)(w[e / 2] >> (16 * (e % 2)));
        }
    }
}

/* ---- Launching (host) ---------------------------------------------------------------------- */

/* A 16-bit tensor's base and its three outer strides allow 16-byte accesses of its rows. */
static inline int fa_rows_aligned16(const void *ptr, int64_t s0, int64_t s1, int64_t s2)
{
    return (uintptr_t)ptr % 16 == 0 && s0 % 8 == 0 && s1 % 8 == 0 && s2 % 8 == 0;
}

/* The device must have compute capability min_cc (major · 10 + minor) or later and smem bytes of
 * opt-in shared memory per block, else FA_ERR_UNSUPPORTED (the caller's fallback takes over); both
 * are read from the cached device info on every call, so a test's fa_overrides.device_cc applies.
 * Once per device (bit dev of *raised; devices past 31 every call) kernel's dynamic limit is raised
 * to smem. Racing threads both set the same value: harmless. */
static inline int fa_tc_prepare(const void *kernel, size_t smem, int min_cc, unsigned *raised)
{
    int dev;
    fa_device info;
    const int st = fa_device_current(&dev, &info);
    if (st != FA_OK)
        return st;
    if (info.major * 10 + info.minor < min_cc || smem > (size_t)info.smem_optin)
        return FA_ERR_UNSUPPORTED;
    if (dev < 32 && ((__atomic_load_n(raised, __ATOMIC_ACQUIRE) >> dev) & 1u))
        return FA_OK;
    FA_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    if (dev < 32)
        __atomic_fetch_or(raised, 1u << dev, __ATOMIC_RELEASE);
    return FA_OK;
}

/* Runs kernel on a 1-D grid over (b·Hq + h) × query tile of BM rows, split into launches of at
 * most 2³¹−1 CTAs: a->n_q_tiles and a->first_block tell each CTA its tile (Args: the kernel's
 * argument struct, with the caller's fa_params as a->p). */
template <class Args>
static int fa_tc_launch_tiles(void (*kernel)(const Args), Args *a, int BM, int threads, size_t smem,
                              cudaStream_t stream)
{
    a->n_q_tiles = (a->p.Nq + BM - 1) / BM;
    const int64_t total = a->n_q_tiles * a->p.B * a->p.Hq;
    for (int64_t first = 0; first < total; first += INT32_MAX) {
        a->first_block = first;
        const int64_t n = total - first < INT32_MAX ? total - first : INT32_MAX;
        kernel<<<(unsigned)n, threads, smem, stream>>>(*a);
        FA_CUDA_TRY(cudaGetLastError());
    }
    return FA_OK;
}

#endif /* FA_MMA_CUH */
