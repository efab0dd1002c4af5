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

/* Opt-in shared memory per block of the compute capabilities fa_overrides.device_cc may name
 * (fa_set_overrides takes no other). */
static int smem_optin_of(int cc)
{
    switch (cc) {
    case 70: case 72: return 96 * 1024;
    case 75: return 64 * 1024;
    case 80: case 87: return 163 * 1024;
    default: return 99 * 1024;           /* 8.6, 8.8, 8.9 */
    }
}

/* fa_overrides.device_cc, when set below the device's own: what an older GPU would report. */
static void apply_device_cc(fa_device *info)
{
    fa_overrides o;
    fa_get_overrides(&o);
    if (o.device_cc == 0 || o.device_cc >= info->major * 10 + info->minor)
        return;
    info->major = o.device_cc / 10;
    info->minor = o.device_cc % 10;
    const int optin = smem_optin_of(o.device_cc);
    info->smem_optin = optin < info->smem_optin ? optin : info->smem_optin;
}

int fa_device_current(int *dev, fa_device *info)
{
    const cudaError_t e = cudaGetDevice(dev);
    if (e != cudaSuccess)
        return fa_record_cuda_error(cudaGetErrorName(e), cudaGetErrorString(e));
    if (*dev < 0 || *dev >= MAX_DEVICES) {
        const int st = query(*dev, info);
        apply_device_cc(info);
        return st;
    }
    if (!__atomic_load_n(&g_ready[*dev], __ATOMIC_ACQUIRE)) {
        fa_device d;
        const int st = query(*dev, &d);
        if (st != FA_OK)
            return st;
        g_info[*dev] = d;                /* racing threads write the same values */
        __atomic_store_n(&g_ready[*dev], 1, __ATOMIC_RELEASE);
    }
    *info = g_info[*dev];
    apply_device_cc(info);
    return FA_OK;
}
