/*
 * trace.cuh — timing hooks for the kernel-development tools, empty in every production build.
 * -DFA_SM90_TRACE (tools/sm90/trace.py builds sm90.cu alone with it) and -DFA_DECODE_TRACE
 * (FA_DECODE_TRACE=1 python3 setup.py ..., for tools/decode_trace.py) turn them into clock64 /
 * %globaltimer stamps. Included by sm90.cu and decode.cu only.
 */
#ifndef FA_TRACE_CUH
#define FA_TRACE_CUH

#include <stdint.h>

/* ---- Hopper forward (sm90.cu) ------------------------------------------------------------------- */

/* FA_SM90_TRACE (tools/sm90/trace.py): stamps per CTA, tile and warpgroup into the buffer
 * fa_sm90_trace_set gives, [CTA][tile < FA_SM90_TRACE_TILES][warpgroup][16]: clock64 at points of
 * the tile, %globaltimer once, the cycles a consumer spent in its main loop's waits (slots 8-11),
 * issuing its wgmmas and in its softmax (14, 15), and the tile's first row (slot 13). Off (no
 * code) in every other build. The clock64 reads pin the main loop's order: a trace build keeps
 * the softmax before the P V wait, where ptxas hoists that wait in the d <= 128 production kernels
 * (no softmax_done fence). With FA_SM90_TRACE_NO_KV=1 as well, a probe: the K / V loads after the
 * ring's first fill are skipped (wrong results), to time the main loop without their traffic. */
#ifdef FA_SM90_TRACE
#define FA_SM90_TRACE_TILES 64
__device__ long long *fa_sm90_trace_buf;
__device__ __forceinline__ void sm90_trace_put(int it, int slot, long long x)
{
    if (fa_sm90_trace_buf != nullptr && threadIdx.x % 128 == 0 && it < FA_SM90_TRACE_TILES)
        fa_sm90_trace_buf[((blockIdx.x * FA_SM90_TRACE_TILES + it) * 4 + threadIdx.x / 128) * 16 + slot] = x;
}
__device__ __forceinline__ long long sm90_globaltimer(void)
{
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    return (long long)ns;
}
#define SM90_TRACE(it, slot) sm90_trace_put((it), (slot), clock64())
#define SM90_TRACE_NS(it, slot) sm90_trace_put((it), (slot), sm90_globaltimer())
#define SM90_TRACE_VAR(v) long long v = 0
#define SM90_TRACE_VAL(it, slot, v) sm90_trace_put((it), (slot), (v))
#define SM90_TRACE_PUT4(it, a, b, c, d) \
    (sm90_trace_put((it), 8, (a)), sm90_trace_put((it), 9, (b)), sm90_trace_put((it), 10, (c)), \
     sm90_trace_put((it), 11, (d)))
#define SM90_TRACE_PUT2(it, a, b) (sm90_trace_put((it), 14, (a)), sm90_trace_put((it), 15, (b)))
#define SM90_TIMED(acc, ...)                    \
    do {                                        \
        const long long t0_ = clock64();        \
        __VA_ARGS__;                            \
        acc += clock64() - t0_;                 \
    } while (0)
#else
#define SM90_TRACE(it, slot)
#define SM90_TRACE_NS(it, slot)
#define SM90_TRACE_VAR(v)
#define SM90_TRACE_VAL(it, slot, v)
#define SM90_TRACE_PUT4(it, a, b, c, d)
#define SM90_TRACE_PUT2(it, a, b)
#define SM90_TIMED(acc, ...) __VA_ARGS__
#endif

/* ---- Split-KV decode (decode.cu) ------------------------------------------------------------- */

#ifdef FA_DECODE_TRACE
/* Built with FA_DECODE_TRACE=1 (setup.py) only: per-CTA timestamps of the attend kernel, printed
 * by thread 0 of every CTA on every call (tools/decode_trace.py reads them). */
#include <stdio.h>
static __device__ unsigned long long g_decode_trace_seq;
static __device__ __forceinline__ uint64_t trace_gt()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#define TRACE_CLK(v) const long long v = clock64()
#else
#define TRACE_CLK(v)
#endif

#endif /* FA_TRACE_CUH */
