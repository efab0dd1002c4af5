/*
 * device.c — the device-info cache of device.h: one query of each attribute per device, so that
 * planning a call costs no driver round trip. Plain C against the CUDA runtime API.
 */
#include <cuda_runtime_api.h>

#include "fa.h"
#include "fa_internal.h"
#include "device.h"

#define MAX_DEVICES 64

static fa_device g_info[MAX_DEVICES];
static int g_ready[MAX_DEVICES];       /* 1 once g_info[dev] is filled (release / acquire) */

static int query(int dev, fa_device *d)
{
    const enum cudaDeviceAttr attrs[5] = {cudaDevAttrComputeCapabilityMajor, cudaDevAttrComputeCapabilityMinor,
                                          cudaDevAttrMultiProcessorCount, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                          cudaDevAttrL2CacheSize};
    int *fields[5] = {&d->major, &d->minor, &d->sms, &d->smem_optin, &d->l2_bytes};
    for (int i = 0; i < 5; i++) {
        const cudaError_t e = cudaDeviceGetAttribute(fields[i], attrs[i], dev);
        if (e != cudaSuccess)
            return fa_record_cuda_error(cudaGetErrorName(e), cudaGetErrorString(e));
    }
    return FA_OK;
}

int fa_device_current(int *dev, fa_device *info)
{
    const cudaError_t e = cudaGetDevice(dev);
    if (e != cudaSuccess)
        return fa_record_cuda_error(cudaGetErrorName(e), cudaGetErrorString(e));
    if (*dev < 0 || *dev >= MAX_DEVICES)
        return query(*dev, info);
    if (!__atomic_load_n(&g_ready[*dev], __ATOMIC_ACQUIRE)) {
        fa_device d;
        const int st = query(*dev, &d);
        if (st != FA_OK)
            return st;
        g_info[*dev] = d;                /* racing threads write the same values */
        __atomic_store_n(&g_ready[*dev], 1, __ATOMIC_RELEASE);
    }
    *info = g_info[*dev];
    return FA_OK;
}
