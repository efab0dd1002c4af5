// SFU (MUFU) throughput per SM and clock of the operations the softmax and a softcap use:
// ex2.approx.ftz.f32, tanh.approx.f32, and for reference rcp.approx.ftz.f32 and an FFMA.
// Every thread runs 8 independent chains of the operation; 32 warps per SM keep the unit fed.
// Results per SM per clock, from clock64 over the loop, medians of 5 launches.
//
//     nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/mufu_rate bench/log/2026-12-05-mufu-rate/mufu_rate.cu
//     /tmp/mufu_rate
#include <algorithm>
#include <cstdio>
#include <vector>

#define ITERS 4096

template <int OP>
__device__ __forceinline__ float op(float x)
{
    float y;
    if (OP == 0)
        asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    else if (OP == 1)
        asm volatile("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    else if (OP == 2)
        asm volatile("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    else
        asm volatile("fma.rn.f32 %0, %1, %1, %1;" : "=f"(y) : "f"(x));
    return y;
}

template <int OP>
__global__ void rate(float *out, long long *clocks)
{
    float v[8];
    for (int i = 0; i < 8; i++)
        v[i] = 0.001f * (threadIdx.x + i);
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < ITERS; it++)
#pragma unroll
        for (int i = 0; i < 8; i++)
            v[i] = op<OP>(v[i]);
    __syncthreads();
    const long long t1 = clock64();
    float s = 0.f;
    for (int i = 0; i < 8; i++)
        s += v[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if (threadIdx.x == 0)
        clocks[blockIdx.x] = t1 - t0;
}

template <int OP>
static double measure(const char *name, int sms)
{
    const int threads = 1024;                       /* 32 warps, one CTA per SM */
    float *out;
    long long *clocks;
    cudaMalloc(&out, sizeof(float) * sms * threads);
    cudaMalloc(&clocks, sizeof(long long) * sms);
    std::vector<double> per;
    for (int rep = 0; rep < 5; rep++) {
        rate<OP><<<sms, threads>>>(out, clocks);
        std::vector<long long> c(sms);
        cudaMemcpy(c.data(), clocks, sizeof(long long) * sms, cudaMemcpyDeviceToHost);
        const long long worst = *std::max_element(c.begin(), c.end());
        per.push_back((double)threads * ITERS * 8 / worst);
    }
    std::sort(per.begin(), per.end());
    printf("%-22s %7.2f results per SM per clock\n", name, per[2]);
    cudaFree(out);
    cudaFree(clocks);
    return per[2];
}

int main()
{
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
    measure<0>("ex2.approx.ftz.f32", prop.multiProcessorCount);
    measure<1>("tanh.approx.f32", prop.multiProcessorCount);
    measure<2>("rcp.approx.ftz.f32", prop.multiProcessorCount);
    measure<3>("fma.rn.f32", prop.multiProcessorCount);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        printf("CUDA error: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
