/*
 * fa_internal.h — what the library's own files share beyond fa.h (not installed, not for callers).
 */
#ifndef FA_INTERNAL_H
#define FA_INTERNAL_H

#ifdef __cplusplus
extern "C" {
#endif

/* Records a failed CUDA call's error name and text for fa_last_cuda_error (this thread) and
 * returns FA_ERR_CUDA. */
int fa_record_cuda_error(const char *name, const char *text);

#ifdef __cplusplus
}
#endif

#endif /* FA_INTERNAL_H */
