/* CUDA_OK(call): the standalone kernel harnesses' (tools/fp32/selftest.cu, tools/sm80/tune.cu)
 * check of a CUDA runtime call: prints file, line and the error, and exits with status 2. */
#ifndef TOOLS_CUDA_OK_H
#define TOOLS_CUDA_OK_H

#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>

#define CUDA_OK(call)                                                                     \
    do {                                                                                  \
        cudaError_t err_ = (call);                                                        \
        if (err_ != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
            exit(2);                                                                      \
        }                                                                                 \
    } while (0)

#endif /* TOOLS_CUDA_OK_H */
