/*
 * device.h — what the planners need to know of a GPU, read once per device (device.c).
 * Plain C; includes no CUDA header, so plan.c and the C tests can use the struct.
 */
#ifndef FA_DEVICE_H
#define FA_DEVICE_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int major, minor;        /* compute capability */
    int sms;                 /* streaming multiprocessors */
    int smem_optin;          /* bytes of dynamic shared memory a block may opt in to */
    int l2_bytes;            /* L2 cache size */
} fa_device;

/* The current device's index and info; the attributes are queried on the first call per device
 * (devices past 63: every call). fa_overrides.device_cc, when set, lowers the compute capability
 * and the opt-in shared memory reported (tests). FA_OK, or FA_ERR_CUDA with the error recorded. */
int fa_device_current(int *dev, fa_device *info);

#ifdef __cplusplus
}
#endif

#endif /* FA_DEVICE_H */
