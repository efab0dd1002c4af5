/*
 * dtype.cuh — element conversions shared by the CUDA kernels that take every dtype
 * (simt.cu, naive.cu; sm80_backward.cu's row sums): to_float reads fp32/fp16/bf16, from_float rounds to nearest even.
 */
#ifndef FA_DTYPE_CUH
#define FA_DTYPE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void from_float(float *dst, float x) { *dst = x; }
__device__ __forceinline__ void from_float(__half *dst, float x) { *dst = __float2half_rn(x); }
__device__ __forceinline__ void from_float(__nv_bfloat16 *dst, float x) { *dst = __float2bfloat16_rn(x); }

#endif /* FA_DTYPE_CUH */
