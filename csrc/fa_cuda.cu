/*
 * fa_cuda.cu — fa_forward_cuda: checks the parameters and picks a kernel
 * family (fa_kernels.h). The environment variable FA_KERNEL forces one:
 *
 *     FA_KERNEL=sm90   the Hopper kernel, fp16/bf16 on compute capability 9.0 (fa_sm90.cu)
 *     FA_KERNEL=sm80   the tensor-core kernel, fp16/bf16 (fa_sm80.cu)
 *     FA_KERNEL=fp32tc fp32 on tensor cores, three TF32 products per product (fa_fp32tc.cu)
 *     FA_KERNEL=fp32   fp32 on CUDA cores, FFMA only (fa_fp32.cu)
 *     FA_KERNEL=simt   the CUDA-core kernel, every dtype (fa_simt.cu)
 *     unset or auto    the fastest family that supports the problem
 *
 * A forced family that cannot run the problem answers FA_ERR_UNSUPPORTED
 * rather than silently running another one.
 */
#include <stdlib.h>
#include <string.h>

#include "fa_kernels.h"

typedef enum {
    FAMILY_AUTO, FAMILY_SM90, FAMILY_SM80, FAMILY_FP32TC, FAMILY_FP32, FAMILY_SIMT, FAMILY_INVALID
} family;

/* FA_KERNEL, read on every call (a few hundred ns) so that tests and
 * benchmarks can switch families inside one process. */
static family forced_family(void)
{
    const char *s = getenv("FA_KERNEL");
    if (s == NULL || *s == '\0' || strcmp(s, "auto") == 0)
        return FAMILY_AUTO;
    if (strcmp(s, "sm90") == 0)
        return FAMILY_SM90;
    if (strcmp(s, "sm80") == 0)
        return FAMILY_SM80;
    if (strcmp(s, "fp32tc") == 0)
        return FAMILY_FP32TC;
    if (strcmp(s, "fp32") == 0)
        return FAMILY_FP32;
    if (strcmp(s, "simt") == 0)
        return FAMILY_SIMT;
    return FAMILY_INVALID;
}

/* Scratch only the Hopper kernel uses, for fp16/bf16 under FA_KERNEL=auto or sm90 on compute
 * capability 9.0. */
extern "C" int fa_forward_scratch_bytes(const fa_params *p, size_t *bytes)
{
    *bytes = 0;
    const int status = fa_check_params(p);
    if (status != FA_OK)
        return status;
    const family f = forced_family();
    if (p->B == 0 || p->Hq == 0 || p->Nq == 0 || p->dtype == FA_FLOAT32 || (f != FAMILY_AUTO && f != FAMILY_SM90))
        return FA_OK;
    int dev, major, minor;
    static int s_major[32], s_minor[32];
    if (cudaGetDevice(&dev) != cudaSuccess
        || fa_cuda_attr(dev, cudaDevAttrComputeCapabilityMajor, s_major, &major) != FA_OK
        || fa_cuda_attr(dev, cudaDevAttrComputeCapabilityMinor, s_minor, &minor) != FA_OK)
        return FA_ERR_CUDA;
    if (major == 9 && minor == 0 && fa_sm90_scratch_bytes(p, bytes) != FA_OK)
        *bytes = 0;
    return FA_OK;
}

extern "C" int fa_forward_cuda(const fa_params *p, struct CUstream_st *stream)
{
    return fa_forward_cuda_scratch(p, NULL, 0, stream);
}

extern "C" int fa_forward_cuda_scratch(const fa_params *p, void *scratch, size_t scratch_bytes,
                                       struct CUstream_st *stream)
{
    const int status = fa_check_params(p);
    if (status != FA_OK)
        return status;
    if (p->B == 0 || p->Hq == 0 || p->Nq == 0)
        return FA_OK;

    switch (forced_family()) {
    case FAMILY_AUTO: {
        /* fp16/bf16: the Hopper kernel on compute capability 9.0, else (or for what it does not
         * take) the sm_80 kernel; fp32: the 3xTF32 tensor-core kernel (d <= 128, sm_80+), else
         * the FFMA kernel; the CUDA-core kernel for what none takes (Nk == 0, devices below
         * sm_80). */
        int status = FA_ERR_UNSUPPORTED;
        if (p->dtype == FA_FLOAT32) {
            status = fa_fp32tc_forward(p, stream);
            if (status == FA_ERR_UNSUPPORTED)
                status = fa_fp32_forward(p, stream);
        } else {
            status = fa_sm90_forward_scratch(p, scratch, scratch_bytes, stream);
            if (status == FA_ERR_UNSUPPORTED)
                status = fa_sm80_forward(p, stream);
        }
        return status == FA_ERR_UNSUPPORTED ? fa_simt_forward(p, stream) : status;
    }
    case FAMILY_SM90:
        return fa_sm90_forward_scratch(p, scratch, scratch_bytes, stream);
    case FAMILY_SM80:
        return fa_sm80_forward(p, stream);
    case FAMILY_FP32TC:
        return fa_fp32tc_forward(p, stream);
    case FAMILY_FP32:
        return fa_fp32_forward(p, stream);
    case FAMILY_SIMT:
        return fa_simt_forward(p, stream);
    default:
        return FA_ERR_KERNEL_CHOICE;
    }
}
