/*
 * fa_kernels.h — the CUDA kernel families behind fa_forward_cuda (fa_cuda.cu).
 *
 * Each family's launcher takes parameters already checked by fa_check_params,
 * for a non-empty problem (B, Hq, Nq >= 1), and returns FA_OK,
 * FA_ERR_UNSUPPORTED (the dispatcher then tries the next family) or
 * FA_ERR_CUDA. Included by the .cu files and the binding's CUDA part.
 */
#ifndef FA_KERNELS_H
#define FA_KERNELS_H

#include <cuda_runtime.h>

#include "fa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fa_simt.cu: CUDA cores, fp32 arithmetic; every dtype, every d, Nk >= 0. */
int fa_simt_forward(const fa_params *p, cudaStream_t stream);

/* fa_sm90.cu: Hopper tensor cores (wgmma, TMA), fp16 and bf16, compute capability 9.0 only,
 * Nk >= 1, scale >= 0, 16-byte aligned rows. */
int fa_sm90_forward(const fa_params *p, cudaStream_t stream);
/* The same with device scratch for a persistent grid's last round split along the keys
 * (fa_sm90_scratch_bytes: what the call would use, 0 when it splits nothing). */
int fa_sm90_forward_scratch(const fa_params *p, void *scratch, size_t scratch_bytes, cudaStream_t stream);
int fa_sm90_scratch_bytes(const fa_params *p, size_t *bytes);

/* fa_sm80.cu: tensor cores (mma.sync), fp16 and bf16, sm_80 and later, Nk >= 1. */
int fa_sm80_forward(const fa_params *p, cudaStream_t stream);

/* fa_fp32.cu: exact fp32 on CUDA cores (FFMA, no TF32), register-blocked tiles, Nk >= 1. */
int fa_fp32_forward(const fa_params *p, cudaStream_t stream);

/* fa_fp32tc.cu: fp32 at fp32 accuracy on tensor cores (3xTF32 mma.sync), sm_80+, d <= 128, Nk >= 1. */
int fa_fp32tc_forward(const fa_params *p, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

/* Attribute attr of device dev, read once per device into cache[dev] (devices past 31: every
 * call), so that launchers can size grids without a device query per call. Defined here, not in
 * fa_cuda.cu, so that a kernel file still builds and loads alone (bench/sm90/tune.py). */
static inline int fa_cuda_attr(int dev, enum cudaDeviceAttr attr, int cache[32], int *v)
{
    if (dev >= 0 && dev < 32 && (*v = __atomic_load_n(&cache[dev], __ATOMIC_ACQUIRE)) > 0)
        return FA_OK;
    if (cudaDeviceGetAttribute(v, attr, dev) != cudaSuccess)
        return FA_ERR_CUDA;
    if (dev >= 0 && dev < 32)
        __atomic_store_n(&cache[dev], *v, __ATOMIC_RELEASE);
    return FA_OK;
}

/* The SM count of device dev, cached per file that asks. */
static inline int fa_cuda_sm_count(int dev, int *sms)
{
    static int s_sms[32];
    return fa_cuda_attr(dev, cudaDevAttrMultiProcessorCount, s_sms, sms);
}

#endif /* FA_KERNELS_H */
