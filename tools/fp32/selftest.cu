/*
 * selftest.cu — standalone check and timing of the fp32 FlashAttention kernels (csrc/cuda/fp32.cu,
 * FFMA; csrc/cuda/fp32tc.cu, 3xTF32 tensor cores) and the unfused baseline (csrc/cuda/naive.cu); the
 * CUDA-core fallback (csrc/cuda/simt.cu) is timed alongside for reference.
 *
 * Checks: random q, k, v on the GPU for a list of awkward cases (padded head dims, sequence
 * tails, Nq != Nk, causal, GQA, a (B, N, H, d) tensor viewed as (B, H, N, d), padded rows,
 * misaligned base pointers, B·H beyond 65535), compared with a float64 host reference computed
 * from the same (rounded) inputs. Outputs are poisoned with NaN first and guarded past their end.
 * fa_fp32tc_forward must decline d > 128 (and does not run those cases).
 * Then times fa_fp32_forward and fa_fp32tc_forward with CUDA events on the benchmark shapes (B·N = 16k tokens,
 * H·d = 2048) and prints TFLOP/s = 4·B·H·N²·d / time, halved when causal.
 *
 *     tools/fp32/run.sh            builds for sm_90a and runs everything
 *     selftest [--check] [--bench] [--small] [--d64] [--no-baselines]
 *         default: check and bench; --small: only cases with N ≤ 128 (for compute-sanitizer);
 *         --d64 / --d128: time that d only; --no-baselines: skip the naive and simt timings.
 * Built with -DWITH_SIMT (and csrc/cuda/simt.cu) it also times fa_simt_forward at N = 1024.
 *
 * Exits nonzero when a check fails.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa.h"
#include "../cuda_ok.h"

extern "C" int fa_fp32_forward(const fa_params *p, cudaStream_t stream);
extern "C" int fa_fp32tc_forward(const fa_params *p, cudaStream_t stream);
extern "C" int fa_naive_forward(const fa_params *p, float *scratch, cudaStream_t stream);
extern "C" size_t fa_naive_scratch_bytes(const fa_params *p);
#ifdef WITH_SIMT
extern "C" int fa_simt_forward(const fa_params *p, cudaStream_t stream);
#endif

typedef struct {
    const char *name;
    fa_dtype dtype;
    int B, Hq, Hkv, Nq, Nk, d;
    int causal;
    int bnhd;        /* storage (B, N, H, d) viewed as (B, H, N, d): row stride H·d */
    int row_pad;     /* extra elements per row (row stride d + row_pad); bhnd only */
    int misalign;    /* base pointers moved by one element: no 16-byte loads or stores */
} test_case;

static const test_case k_cases[] = {
    /* name                        dtype        B   Hq Hkv  Nq    Nk    d  causal bnhd pad mis */
    {"d1 1x1",                     FA_FLOAT32,  1,  1, 1,   1,    1,    1,  0, 0, 0, 0},
    {"d1 128x1025 causal",         FA_FLOAT32,  1,  2, 2,   128,  1025, 1,  1, 0, 0, 0},
    {"d40 17x17 causal",           FA_FLOAT32,  2,  3, 3,   17,   17,   40, 1, 0, 0, 0},
    {"d64 128x128",                FA_FLOAT32,  2,  4, 4,   128,  128,  64, 0, 0, 0, 0},
    {"d64 128x128 causal",         FA_FLOAT32,  2,  4, 4,   128,  128,  64, 1, 0, 0, 0},
    {"d64 1025 causal gqa 4/2",    FA_FLOAT32,  1,  4, 2,   1025, 1025, 64, 1, 0, 0, 0},
    {"d64 1025x97 causal",         FA_FLOAT32,  1,  2, 1,   1025, 97,   64, 1, 0, 0, 0},
    {"d80 pad4 97x1025 causal",    FA_FLOAT32,  1,  2, 2,   97,   1025, 80, 1, 0, 4, 0},
    {"d128 1025 causal",           FA_FLOAT32,  1,  2, 2,   1025, 1025, 128, 1, 0, 0, 0},
    {"d128 17x1025",               FA_FLOAT32,  1,  2, 2,   17,   1025, 128, 0, 0, 0, 0},
    {"d128 1025x17 causal",        FA_FLOAT32,  1,  2, 2,   1025, 17,   128, 1, 0, 0, 0},
    {"d200 97x1025",               FA_FLOAT32,  1,  1, 1,   97,   1025, 200, 0, 0, 0, 0},
    {"d256 1025x17 causal gqa",    FA_FLOAT32,  1,  2, 1,   1025, 17,   256, 1, 0, 0, 0},
    {"d256 1x1025 causal",         FA_FLOAT32,  1,  1, 1,   1,    1025, 256, 1, 0, 0, 0},
    {"d256 1025x1025",             FA_FLOAT32,  1,  1, 1,   1025, 1025, 256, 0, 0, 0, 0},
    {"bnhd d64 128x1025 gqa",      FA_FLOAT32,  2,  4, 2,   128,  1025, 64, 0, 1, 0, 0},
    {"bnhd d40 1025x17",           FA_FLOAT32,  1,  2, 2,   1025, 17,   40, 0, 1, 0, 0},
    {"bnhd d17 17x128 causal",     FA_FLOAT32,  1,  2, 2,   17,   128,  17, 1, 1, 0, 0},
    {"misaligned d128 128 causal", FA_FLOAT32,  1,  2, 2,   128,  128,  128, 1, 0, 0, 1},
    {"misaligned d64 17x1025",     FA_FLOAT32,  2,  2, 1,   17,   1025, 64, 0, 0, 0, 1},
    {"misaligned d256 97x97 caus", FA_FLOAT32,  1,  1, 1,   97,   97,   256, 1, 0, 0, 1},
    {"B70000 d8 1x17",             FA_FLOAT32,  70000, 1, 1, 1,   17,   8,  0, 0, 0, 0},
    {"fp16 d64 97x1025 causal",    FA_FLOAT16,  1,  2, 1,   97,   1025, 64, 1, 0, 0, 0},
    {"bf16 d128 1025x17 causal",   FA_BFLOAT16, 1,  2, 2,   1025, 17,   128, 1, 0, 0, 0},
    {"fp16 misaligned d40 17x128", FA_FLOAT16,  1,  2, 2,   17,   128,  40, 0, 0, 0, 1},
    {"bf16 bnhd d80 128x97",       FA_BFLOAT16, 2,  4, 2,   128,  97,   80, 0, 1, 0, 0},
};

static const int k_guard = 64;        /* poisoned elements past every output */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static double rand_uniform(void)      /* (0, 1) */
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return ((g_rng >> 11) + 0.5) / 9007199254740992.0;
}

static float rand_normal(void)
{
    return (float)(sqrt(-2.0 * log(rand_uniform())) * cos(6.283185307179586 * rand_uniform()));
}

static size_t elem_size(fa_dtype dt) { return dt == FA_FLOAT32 ? 4 : 2; }

/* x rounded to dt, stored at dst (elem_size bytes); returns the rounded value. */
static float store_elem(void *dst, float x, fa_dtype dt)
{
    if (dt == FA_FLOAT32) {
        memcpy(dst, &x, 4);
        return x;
    }
    if (dt == FA_FLOAT16) {
        __half h = __float2half_rn(x);
        memcpy(dst, &h, 2);
        return __half2float(h);
    }
    __nv_bfloat16 h = __float2bfloat16_rn(x);
    memcpy(dst, &h, 2);
    return __bfloat162float(h);
}

static float load_elem(const void *src, fa_dtype dt)
{
    if (dt == FA_FLOAT32) {
        float x;
        memcpy(&x, src, 4);
        return x;
    }
    uint16_t u;
    memcpy(&u, src, 2);
    if (dt == FA_FLOAT16)
        return __half2float(*(__half *)&u);
    return __bfloat162float(*(__nv_bfloat16 *)&u);
}

/* One (B, H, N, d) tensor: strides in elements and its storage size. */
typedef struct { int64_t sb, sh, sr, elems; } layout;

static layout make_layout(const test_case *c, int H, int N)
{
    layout l;
    if (c->bnhd) {
        l.sr = (int64_t)H * c->d, l.sh = c->d, l.sb = (int64_t)N * H * c->d;
    } else {
        l.sr = c->d + c->row_pad, l.sh = (int64_t)N * l.sr, l.sb = (int64_t)H * l.sh;
    }
    l.elems = c->B * l.sb;
    return l;
}

/* Random tensor: host copy of the rounded values and a device copy at base + off elements. */
static float *make_input(const layout *l, fa_dtype dt, int off, unsigned char **dev_base)
{
    const size_t es = elem_size(dt);
    float *h = (float *)malloc(l->elems * sizeof(float));
    unsigned char *raw = (unsigned char *)malloc(l->elems * es);
    for (int64_t i = 0; i < l->elems; i++)
        h[i] = store_elem(raw + i * es, rand_normal(), dt);
    CUDA_OK(cudaMalloc(dev_base, (l->elems + 8) * es));
    CUDA_OK(cudaMemcpy(*dev_base + off * es, raw, l->elems * es, cudaMemcpyHostToDevice));
    free(raw);
    return h;
}

static int all_ones(const unsigned char *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (x[i] != 0xff)
            return 0;
    return 1;
}

typedef enum { KERNEL_FP32, KERNEL_FP32TC, KERNEL_NAIVE } kernel_id;
static const char *const k_kernel_names[] = {"fp32", "fp32tc", "naive"};

/* Runs one kernel on one case; returns 1 on pass. */
static int run_case(const test_case *c, kernel_id kid)
{
    const fa_dtype dt = c->dtype;
    const size_t es = elem_size(dt);
    const int off = c->misalign ? 1 : 0;
    const layout lq = make_layout(c, c->Hq, c->Nq), lk = make_layout(c, c->Hkv, c->Nk);
    const layout lo = lq;
    const double scale = (float)(1.0 / sqrt((double)c->d));   /* as the kernel sees it */

    unsigned char *d_q, *d_k, *d_v, *d_o;
    float *d_lse, *d_scratch = NULL;
    float *h_q = make_input(&lq, dt, off, &d_q);
    float *h_k = make_input(&lk, dt, off, &d_k);
    float *h_v = make_input(&lk, dt, off, &d_v);
    const int64_t n_lse = (int64_t)c->B * c->Hq * c->Nq;
    const size_t o_bytes = (lo.elems + off + k_guard) * es, lse_bytes = (n_lse + k_guard) * sizeof(float);
    CUDA_OK(cudaMalloc(&d_o, o_bytes));
    CUDA_OK(cudaMalloc(&d_lse, lse_bytes));
    CUDA_OK(cudaMemset(d_o, 0xff, o_bytes));        /* NaN */
    CUDA_OK(cudaMemset(d_lse, 0xff, lse_bytes));    /* NaN */

    fa_params p;
    memset(&p, 0, sizeof p);
    p.q = d_q + off * es, p.k = d_k + off * es, p.v = d_v + off * es, p.o = d_o + off * es;
    p.lse = d_lse;
    p.q_batch_stride = lq.sb, p.q_head_stride = lq.sh, p.q_row_stride = lq.sr;
    p.k_batch_stride = lk.sb, p.k_head_stride = lk.sh, p.k_row_stride = lk.sr;
    p.v_batch_stride = lk.sb, p.v_head_stride = lk.sh, p.v_row_stride = lk.sr;
    p.o_batch_stride = lo.sb, p.o_head_stride = lo.sh, p.o_row_stride = lo.sr;
    p.B = c->B, p.Hq = c->Hq, p.Hkv = c->Hkv, p.Nq = c->Nq, p.Nk = c->Nk, p.d = c->d;
    p.scale = (float)scale;
    p.causal = c->causal;
    p.dtype = dt;

    int st;
    if (kid == KERNEL_FP32) {
        st = fa_fp32_forward(&p, 0);
    } else if (kid == KERNEL_FP32TC) {
        st = fa_fp32tc_forward(&p, 0);
    } else {
        CUDA_OK(cudaMalloc(&d_scratch, fa_naive_scratch_bytes(&p)));
        st = fa_naive_forward(&p, d_scratch, 0);
    }
    CUDA_OK(cudaDeviceSynchronize());

    unsigned char *o_raw = (unsigned char *)malloc(o_bytes);
    float *lse = (float *)malloc(lse_bytes);
    CUDA_OK(cudaMemcpy(o_raw, d_o, o_bytes, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(lse, d_lse, lse_bytes, cudaMemcpyDeviceToHost));

    /* fp32: accumulation-order error only; fp16/bf16: the output is rounded to 11 / 8 bits. */
    const double tol = dt == FA_FLOAT32 ? 2e-5 : dt == FA_FLOAT16 ? 4e-3 : 2e-2;
    const double tol_lse = 2e-5;
    double err_o = 0, worst = 0, err_lse = 0;
    int bad_guard = 0;
    double *s = (double *)malloc(c->Nk * sizeof(double));
    double *acc = (double *)malloc(c->d * sizeof(double));
    char *valid = (char *)calloc(lo.elems, 1);     /* o elements the kernel must write */
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->Hq; h++) {
            const int hk = h / (c->Hq / c->Hkv);
            for (int i = 0; i < c->Nq; i++) {
                const float *q = h_q + b * lq.sb + h * lq.sh + i * lq.sr;
                const int n_keys = c->causal ? (i + 1 < c->Nk ? i + 1 : c->Nk) : c->Nk;
                double m = -INFINITY, l = 0;
                for (int j = 0; j < n_keys; j++) {
                    const float *k = h_k + b * lk.sb + hk * lk.sh + j * lk.sr;
                    double dot = 0;
                    for (int e = 0; e < c->d; e++)
                        dot += (double)q[e] * k[e];
                    s[j] = dot * scale;
                    m = s[j] > m ? s[j] : m;
                }
                for (int e = 0; e < c->d; e++)
                    acc[e] = 0;
                for (int j = 0; j < n_keys; j++) {
                    const float *v = h_v + b * lk.sb + hk * lk.sh + j * lk.sr;
                    const double pj = exp(s[j] - m);
                    l += pj;
                    for (int e = 0; e < c->d; e++)
                        acc[e] += pj * v[e];
                }
                for (int e = 0; e < c->d; e++) {
                    const int64_t at = b * lo.sb + h * lo.sh + i * lo.sr + e;
                    const double ref = acc[e] / l;
                    const double got = load_elem(o_raw + (off + at) * es, dt);
                    valid[at] = 1;
                    const double err = isnan(got) ? INFINITY : fabs(got - ref);
                    err_o = err > err_o ? err : err_o;
                    const double norm = err / (1 + fabs(ref));
                    worst = norm > worst ? norm : worst;
                }
                const double ref = m + log(l);
                const double got = lse[((int64_t)b * c->Hq + h) * c->Nq + i];
                const double err = isnan(got) ? INFINITY : fabs(got - ref);
                err_lse = err > err_lse ? err : err_lse;
            }
        }
    for (int64_t e = 0; e < lo.elems; e++)        /* row padding must stay poisoned */
        bad_guard |= !valid[e] && !all_ones(o_raw + (off + e) * es, es);
    bad_guard |= !all_ones(o_raw, off * es);
    bad_guard |= !all_ones(o_raw + (off + lo.elems) * es, k_guard * es);
    bad_guard |= !all_ones((const unsigned char *)(lse + n_lse), k_guard * sizeof(float));

    /* fp32tc declines d > 128 (the dispatcher then runs fp32): it must return
     * FA_ERR_UNSUPPORTED and leave o and lse untouched. */
    int pass;
    if (kid == KERNEL_FP32TC && c->d > 128) {
        int touched = !all_ones(o_raw, o_bytes) || !all_ones((const unsigned char *)lse, lse_bytes);
        pass = st == FA_ERR_UNSUPPORTED && !touched;
        printf("%-6s %-28s %s  status %d  declines d > 128%s  %s\n", k_kernel_names[kid], c->name, "f32 ",
               st, touched ? "  WROTE o/lse" : "", pass ? "PASS" : "FAIL");
    } else {
        pass = st == FA_OK && worst <= tol && err_lse <= tol_lse && !bad_guard;
        printf("%-6s %-28s %s  status %d  max|o-ref| %.2e (tol %.0e·(1+|ref|))  max|lse-ref| %.2e%s  %s\n",
               k_kernel_names[kid], c->name,
               dt == FA_FLOAT32 ? "f32 " : dt == FA_FLOAT16 ? "fp16" : "bf16", st, err_o, tol, err_lse,
               bad_guard ? "  WROTE OUTSIDE o/lse" : "", pass ? "PASS" : "FAIL");
    }
    fflush(stdout);

    free(s), free(acc), free(valid), free(o_raw), free(lse), free(h_q), free(h_k), free(h_v);
    CUDA_OK(cudaFree(d_q));
    CUDA_OK(cudaFree(d_k));
    CUDA_OK(cudaFree(d_v));
    CUDA_OK(cudaFree(d_o));
    CUDA_OK(cudaFree(d_lse));
    if (d_scratch != NULL)
        CUDA_OK(cudaFree(d_scratch));
    return pass;
}

/* fa_fp32_forward and fa_fp32tc_forward must decline what they do not run, so the dispatcher
 * can fall back. */
static int check_declines(kernel_id kid)
{
    int (*forward)(const fa_params *, cudaStream_t) = kid == KERNEL_FP32 ? fa_fp32_forward : fa_fp32tc_forward;
    fa_params p;
    memset(&p, 0, sizeof p);
    p.B = p.Hq = p.Hkv = p.Nq = 1, p.Nk = 1, p.d = 64, p.scale = 0.125f;
    p.dtype = FA_FLOAT16;
    const int st_dtype = forward(&p, 0);
    p.dtype = FA_FLOAT32, p.Nk = 0;
    const int st_empty = forward(&p, 0);
    const int pass = st_dtype == FA_ERR_UNSUPPORTED && st_empty == FA_ERR_UNSUPPORTED;
    printf("%-6s declines fp16 and Nk=0             status %d, %d  %s\n", k_kernel_names[kid], st_dtype,
           st_empty, pass ? "PASS" : "FAIL");
    return pass;
}

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

typedef enum { TIME_FP32, TIME_FP32TC, TIME_NAIVE, TIME_SIMT } time_id;

/* Median milliseconds of reps calls, after 2 warm-up calls. */
static float time_kernel(time_id tid, const fa_params *p, float *scratch, int reps)
{
    cudaEvent_t t0, t1;
    CUDA_OK(cudaEventCreate(&t0));
    CUDA_OK(cudaEventCreate(&t1));
    float ms[64];
    for (int r = -2; r < reps; r++) {
        CUDA_OK(cudaEventRecord(t0));
        int st = FA_ERR_UNSUPPORTED;
        if (tid == TIME_FP32)
            st = fa_fp32_forward(p, 0);
        else if (tid == TIME_FP32TC)
            st = fa_fp32tc_forward(p, 0);
        else if (tid == TIME_NAIVE)
            st = fa_naive_forward(p, scratch, 0);
#ifdef WITH_SIMT
        else
            st = fa_simt_forward(p, 0);
#endif
        CUDA_OK(cudaEventRecord(t1));
        CUDA_OK(cudaEventSynchronize(t1));
        if (st != FA_OK) {
            fprintf(stderr, "timing: status %d\n", st);
            exit(2);
        }
        if (r >= 0)
            CUDA_OK(cudaEventElapsedTime(&ms[r], t0, t1));
    }
    CUDA_OK(cudaEventDestroy(t0));
    CUDA_OK(cudaEventDestroy(t1));
    qsort(ms, reps, sizeof(float), cmp_float);
    return ms[reps / 2];
}

__global__ void fill_normalish(float *x, int64_t n, uint32_t seed)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 16, h *= 0x7feb352du, h ^= h >> 15, h *= 0x846ca68bu, h ^= h >> 16;
        x[i] = (float)h * (3.4641016f / 4294967296.0f) - 1.7320508f;   /* uniform, variance 1 */
    }
}

/* The benchmark shapes: B·N = 16384 tokens, H·d = 2048, (B, H, N, d) contiguous. */
static void bench(int only_d, int baselines)
{
    const int64_t tokens = 16384, width = 2048;
    float *buf;
    CUDA_OK(cudaMalloc(&buf, 4 * tokens * width * sizeof(float)));
    fill_normalish<<<1024, 256>>>(buf, 4 * tokens * width, 1234u);
    CUDA_OK(cudaDeviceSynchronize());

    printf("\n%-7s %4s %6s %3s %3s %6s  %10s %9s\n", "kernel", "d", "N", "B", "H", "causal", "ms", "TFLOP/s");
    const int ds[2] = {64, 128}, ns[3] = {1024, 4096, 16384};
    for (int di = 0; di < 2; di++)
        for (int ni = 0; ni < 3; ni++)
            for (int causal = 0; causal < 2; causal++) {
                const int64_t d = ds[di], N = ns[ni], B = tokens / N, H = width / d;
                if (only_d && d != only_d)
                    continue;
                fa_params p;
                memset(&p, 0, sizeof p);
                p.q = buf, p.k = buf + tokens * width, p.v = buf + 2 * tokens * width, p.o = buf + 3 * tokens * width;
                p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = p.o_batch_stride = H * N * d;
                p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = N * d;
                p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = d;
                p.B = B, p.Hq = p.Hkv = H, p.Nq = p.Nk = N, p.d = d;
                p.scale = 1.0f / sqrtf((float)d);
                p.causal = causal;
                p.dtype = FA_FLOAT32;
                const double flop = 4.0 * B * H * N * N * d * (causal ? 0.5 : 1.0);

                const float ms = time_kernel(TIME_FP32, &p, NULL, 15);
                printf("%-7s %4d %6d %3d %3d %6d  %10.3f %9.2f\n", "fp32", (int)d, (int)N, (int)B, (int)H,
                       causal, ms, flop / ms * 1e-9);
                const float ms_tc = time_kernel(TIME_FP32TC, &p, NULL, 15);
                printf("%-7s %4d %6d %3d %3d %6d  %10.3f %9.2f\n", "fp32tc", (int)d, (int)N, (int)B, (int)H,
                       causal, ms_tc, flop / ms_tc * 1e-9);
                if (baselines && N <= 4096) {   /* scratch B·H·N² floats: 8.6 GB at N = 4096 */
                    float *scratch;
                    CUDA_OK(cudaMalloc(&scratch, fa_naive_scratch_bytes(&p)));
                    const float ms_naive = time_kernel(TIME_NAIVE, &p, scratch, 3);
                    CUDA_OK(cudaFree(scratch));
                    printf("%-7s %4d %6d %3d %3d %6d  %10.3f %9.2f\n", "naive", (int)d, (int)N, (int)B, (int)H,
                           causal, ms_naive, flop / ms_naive * 1e-9);
                }
#ifdef WITH_SIMT
                if (baselines && N == 1024) {
                    const float ms_simt = time_kernel(TIME_SIMT, &p, NULL, 3);
                    printf("%-7s %4d %6d %3d %3d %6d  %10.3f %9.2f\n", "simt", (int)d, (int)N, (int)B, (int)H,
                           causal, ms_simt, flop / ms_simt * 1e-9);
                }
#endif
                fflush(stdout);
            }
    CUDA_OK(cudaFree(buf));
}

int main(int argc, char **argv)
{
    int check = 0, timing = 0, small = 0, only_d = 0, baselines = 1;
    for (int i = 1; i < argc; i++) {
        check |= strcmp(argv[i], "--check") == 0;
        timing |= strcmp(argv[i], "--bench") == 0;
        small |= strcmp(argv[i], "--small") == 0;
        only_d = strcmp(argv[i], "--d64") == 0 ? 64 : only_d;
        only_d = strcmp(argv[i], "--d128") == 0 ? 128 : only_d;
        baselines &= strcmp(argv[i], "--no-baselines") != 0;
    }
    if (!check && !timing)
        check = timing = 1;

    int dev;
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaGetDeviceProperties(&prop, dev));
    printf("device: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);

    int passed = 0, failed = 0;
    if (check) {
        for (int kid = KERNEL_FP32; kid <= KERNEL_FP32TC; kid++) {
            if (check_declines((kernel_id)kid))
                passed++;
            else
                failed++;
        }
        for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
            const test_case *c = &k_cases[i];
            if (small && (c->Nq > 128 || c->Nk > 128 || c->B * c->Hq > 64))
                continue;
            for (int kid = KERNEL_FP32; kid <= KERNEL_NAIVE; kid++) {
                if (kid != KERNEL_NAIVE && c->dtype != FA_FLOAT32)
                    continue;
                if (run_case(c, (kernel_id)kid))
                    passed++;
                else
                    failed++;
            }
        }
        printf("%d passed, %d failed\n", passed, failed);
    }
    if (timing)
        bench(only_d, baselines);
    return failed ? 1 : 0;
}
