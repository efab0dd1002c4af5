/*
 * families.h — the CUDA kernel families behind fa_forward_cuda (dispatch.cu).
 *
 * Each family's launcher takes parameters already checked by fa_check_params,
 * for a non-empty problem (B, Hq, Nq >= 1), and returns FA_OK,
 * FA_ERR_UNSUPPORTED (the dispatcher then tries the next family) or
 * FA_ERR_CUDA (the CUDA error recorded for fa_last_cuda_error). dispatch.cu is their only caller;
 * each .cu file includes this header, fa.h and CUDA headers only.
 */
#ifndef FA_FAMILIES_H
#define FA_FAMILIES_H

#include <cuda_runtime.h>

#include "fa.h"
#include "fa_internal.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* simt.cu: CUDA cores, fp32 arithmetic; every dtype, every d, Nk >= 0; sm_70 and later. */
int fa_simt_forward(const fa_params *p, cudaStream_t stream);

/* sm90.cu: Hopper tensor cores (wgmma, TMA), fp16 and bf16, compute capability 9.0 only,
 * Nk >= 1, scale >= 0, 16-byte aligned rows. o: the tile walk's overrides (sm90_grid, sm90_tail).
 * scratch: room for a persistent grid's last round split along the keys (fa_sm90_scratch_bytes:
 * what the call would use, 0 when it splits nothing); with less, those tiles run whole. */
int fa_sm90_forward(const fa_params *p, const fa_overrides *o, void *scratch, size_t scratch_bytes,
                    cudaStream_t stream);
int fa_sm90_scratch_bytes(const fa_params *p, const fa_overrides *o, size_t *bytes);
/* The same kernel with the variants of v (checked by fa_check_variants), packed sequences
 * included. scratch (fa_sm90_variants_scratch_bytes: what the call would use): a packed call's tile
 * counter, without which it walks its tiles statically; for sinks alone (the plain tiles' SINK
 * kernels) and calls whose variants leave nothing to do, the split last round's, as
 * fa_sm90_forward's; 0 for any other. */
int fa_sm90_forward_variants(const fa_params *p, const fa_variants *v, const fa_overrides *o, void *scratch,
                             size_t scratch_bytes, cudaStream_t stream);
int fa_sm90_variants_scratch_bytes(const fa_params *p, const fa_variants *v, const fa_overrides *o,
                                   size_t *bytes);

/* sm80.cu: tensor cores (mma.sync), fp16 and bf16, sm_80 and later, Nk >= 1. With the variants
 * of v (checked by fa_check_variants): every one, packed sequences included. */
int fa_sm80_forward(const fa_params *p, cudaStream_t stream);
int fa_sm80_forward_variants(const fa_params *p, const fa_variants *v, cudaStream_t stream);

/* sm90_backward.cu: the backward pass on Hopper (wgmma, TMA), fp16 and bf16, compute capability 9.0
 * only, d <= 128, 16-byte aligned rows, both causal alignments, windows and sinks (softcap, ALiBi,
 * key_mask and packed sequences answer FA_ERR_UNSUPPORTED). workspace: as fa_sm80_backward's. */
int fa_sm90_backward(const fa_backward_params *bp, const fa_variants *v, void *workspace, size_t workspace_bytes,
                     cudaStream_t stream);

/* sm80_backward.cu: the backward pass on tensor cores (mma.sync), fp16 and bf16, sm_80 and later,
 * d <= 128, Nq, Nk >= 1 (packed: the longest lengths); every variant but a mask tensor (that
 * answers FA_ERR_UNSUPPORTED). workspace: at least fa_sm80_backward_workspace_bytes. */
int fa_sm80_backward_workspace_bytes(const fa_backward_params *bp, const fa_variants *v, size_t *bytes);
int fa_sm80_backward(const fa_backward_params *bp, const fa_variants *v, void *workspace, size_t workspace_bytes,
                     cudaStream_t stream);

/* decode.cu: the split-KV kernel for attention calls (dispatch.cu's routes, plan.h): kp over the whole
 * of k and v (no cache_seqlens, no append), the queries bottom-right; the variants as the KV-cache
 * entry takes them (fa.h), key_mask too (checked by the caller). Scratch as fa_kvcache_scratch_bytes. */
int fa_decode_attention_scratch_bytes(const fa_kvcache_params *kp, const fa_variants *v, size_t *bytes);
int fa_decode_attention_cuda(const fa_kvcache_params *kp, const fa_variants *v, void *scratch, size_t scratch_bytes,
                             cudaStream_t stream);
/* fp32.cu: exact fp32 on CUDA cores (FFMA, no TF32), register-blocked tiles, sm_80+ (cp.async), Nk >= 1. */
int fa_fp32_forward(const fa_params *p, cudaStream_t stream);

/* turing.cu: Turing tensor cores (mma.sync m16n8k8, register-staged loads), fp16 only, sm_75 and
 * later (compute_75 PTX beyond sm_75), Nk >= 1. */
int fa_turing_forward(const fa_params *p, cudaStream_t stream);

/* fp32tc.cu: fp32 at fp32 accuracy on tensor cores (3xTF32 mma.sync), sm_80+, d <= 128, Nk >= 1. */
int fa_fp32tc_forward(const fa_params *p, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

/* Records a failed CUDA call (fa_last_cuda_error) and returns FA_ERR_CUDA. */
static inline int fa_cuda_fail(cudaError_t e)
{
    return fa_record_cuda_error(cudaGetErrorName(e), cudaGetErrorString(e));
}

/* Returns FA_ERR_CUDA from the enclosing function, the error recorded, when a CUDA call fails. */
#define FA_CUDA_TRY(call)                     \
    do {                                      \
        const cudaError_t fa_e_ = (call);     \
        if (fa_e_ != cudaSuccess)             \
            return fa_cuda_fail(fa_e_);       \
    } while (0)

#endif /* FA_FAMILIES_H */
