/*
 * fa_internal.h — what the library's own files share beyond fa.h (not installed, not for callers).
 */
#ifndef FA_INTERNAL_H
#define FA_INTERNAL_H

#include <stdint.h>

#include "fa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records a failed CUDA call's error name and text for fa_last_cuda_error (this thread) and
 * returns FA_ERR_CUDA. */
int fa_record_cuda_error(const char *name, const char *text);

/* fa_overrides.cpu_lanes as set (0: automatic), read by the C backend's wide_vectors. */
int fa_cpu_lanes_override(void);

/* Whether two k-dim views (k <= 8) of elements of elem_bytes bytes, at a and b with sizes n and
 * element strides sa and sb, share a byte: an exact search over the indices (1 also where it
 * would take more than a bounded number of steps, so a caller refuses what it cannot show apart). */
int fa_views_meet(const void *a, const void *b, int64_t elem_bytes, int k, const int64_t *n, const int64_t *sa,
                  const int64_t *sb);

/* Host cu_seqlens (B + 1 entries): FA_OK, or FA_ERR_CU_SEQLENS when they do not start at 0,
 * decrease, hold a length over *len (max_seqlen on entry) or end past total. On FA_OK *len is the
 * longest sequence's length. */
int fa_check_cu_seqlens(const int32_t *cu, int64_t B, int64_t *len, int64_t total);

/* The backward pass's parameters (fa_check_variants, then dout, dq, dk, dv: strides >= 0, data
 * pointers of a non-empty problem not NULL); host cu_seqlens are not read here. */
int fa_check_backward(const fa_backward_params *bp, const fa_variants *v);

/* A backward problem with nothing to write: no batch, no kv head (so no query head), or neither
 * queries nor keys (every gradient empty). */
static inline int fa_backward_is_empty(const fa_params *p)
{
    return p->B == 0 || p->Hkv == 0 || (p->Nq == 0 && p->Nk == 0);
}

#ifdef __cplusplus
}
#endif

#endif /* FA_INTERNAL_H */
