/*
 * fa_cuda.cu — fa_forward_cuda: checks the parameters and picks a kernel
 * family (fa_kernels.h). The environment variable FA_KERNEL forces one:
 *
 *     FA_KERNEL=sm80   the tensor-core kernel, fp16/bf16 (fa_sm80.cu)
 *     FA_KERNEL=fp32   the exact fp32 kernel (fa_fp32.cu)
 *     FA_KERNEL=simt   the CUDA-core kernel, every dtype (fa_simt.cu)
 *     unset or auto    the fastest family that supports the problem
 *
 * A forced family that cannot run the problem answers FA_ERR_UNSUPPORTED
 * rather than silently running another one.
 */
#include <stdlib.h>
#include <string.h>

#include "fa_kernels.h"

typedef enum { FAMILY_AUTO, FAMILY_SM80, FAMILY_FP32, FAMILY_SIMT, FAMILY_INVALID } family;

/* FA_KERNEL, read on every call (a few hundred ns) so that tests and
 * benchmarks can switch families inside one process. */
static family forced_family(void)
{
    const char *s = getenv("FA_KERNEL");
    if (s == NULL || *s == '\0' || strcmp(s, "auto") == 0)
        return FAMILY_AUTO;
    if (strcmp(s, "sm80") == 0)
        return FAMILY_SM80;
    if (strcmp(s, "fp32") == 0)
        return FAMILY_FP32;
    if (strcmp(s, "simt") == 0)
        return FAMILY_SIMT;
    return FAMILY_INVALID;
}

extern "C" int fa_forward_cuda(const fa_params *p, struct CUstream_st *stream)
{
    const int status = fa_check_params(p);
    if (status != FA_OK)
        return status;
    if (p->B == 0 || p->Hq == 0 || p->Nq == 0)
        return FA_OK;

    switch (forced_family()) {
    case FAMILY_AUTO: {
        /* Tensor cores for fp16/bf16, the tiled fp32 kernel for fp32, and the CUDA-core kernel
         * for what neither takes (Nk == 0, devices below sm_80). */
        int status = p->dtype == FA_FLOAT32 ? fa_fp32_forward(p, stream) : fa_sm80_forward(p, stream);
        return status == FA_ERR_UNSUPPORTED ? fa_simt_forward(p, stream) : status;
    }
    case FAMILY_SM80:
        return fa_sm80_forward(p, stream);
    case FAMILY_FP32:
        return fa_fp32_forward(p, stream);
    case FAMILY_SIMT:
        return fa_simt_forward(p, stream);
    default:
        return FA_ERR_KERNEL_CHOICE;
    }
}
