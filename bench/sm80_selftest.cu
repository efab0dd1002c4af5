/*
 * sm80_selftest.cu — standalone check of the fp16/bf16 tensor-core kernel (csrc/fa_sm80.cu).
 *
 * Fills random q, k, v on the GPU for a list of awkward cases (head dims that need padding,
 * sequence tails, Nq != Nk, causal, GQA, a (B, N, H, d) tensor viewed as (B, H, N, d), padded
 * rows, misaligned base pointers), runs fa_sm80_forward, and compares o and lse against a
 * float64 reference computed on the host from the same rounded inputs. Outputs are poisoned
 * with NaN first and guarded past their end, so unwritten or stray elements show up.
 *
 *     nvcc -std=c++17 -O3 -arch=sm_90a -Icsrc bench/sm80_selftest.cu csrc/fa_sm80.cu \
 *          -o /tmp/sm80_selftest && /tmp/sm80_selftest
 *
 * Prints one line per case and "N passed, M failed"; exits nonzero on any failure.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa.h"

extern "C" int fa_sm80_forward(const fa_params *p, cudaStream_t stream);

typedef struct {
    const char *name;
    fa_dtype dtype;
    int B, Hq, Hkv, Nq, Nk, d;
    int causal;
    int bnhd;        /* storage (B, N, H, d) viewed as (B, H, N, d): row stride H·d */
    int row_pad;     /* extra elements per row (row stride d + row_pad); bhnd only */
    int misalign;    /* base pointers moved by one element: no 16-byte loads or stores */
    int lse;         /* also check lse */
} test_case;

static const test_case k_cases[] = {
    /* name                      dtype        B Hq Hkv  Nq    Nk    d  causal bnhd pad mis lse */
    {"d64 128x128",              FA_FLOAT16,  2, 4, 4,  128,  128,  64, 0, 0, 0, 0, 1},
    {"d64 128x128 causal",       FA_FLOAT16,  2, 4, 4,  128,  128,  64, 1, 0, 0, 0, 1},
    {"d128 1025 causal",         FA_BFLOAT16, 1, 2, 2,  1025, 1025, 128, 1, 0, 0, 0, 1},
    {"d128 17x1025",             FA_FLOAT16,  1, 2, 2,  17,   1025, 128, 0, 0, 0, 0, 1},
    {"d128 1025x17 causal",      FA_FLOAT16,  1, 2, 2,  1025, 17,   128, 1, 0, 0, 0, 1},
    {"d256 1025x17 causal gqa",  FA_BFLOAT16, 1, 2, 1,  1025, 17,   256, 1, 0, 0, 0, 1},
    {"d256 1x1025 causal",       FA_FLOAT16,  1, 1, 1,  1,    1025, 256, 1, 0, 0, 0, 1},
    {"d256 1025x1025",           FA_BFLOAT16, 1, 1, 1,  1025, 1025, 256, 0, 0, 0, 0, 1},
    {"d64 1025 causal gqa 4/2",  FA_FLOAT16,  1, 4, 2,  1025, 1025, 64, 1, 0, 0, 0, 1},
    {"d40 17x17 causal",         FA_FLOAT16,  2, 3, 3,  17,   17,   40, 1, 0, 0, 0, 1},
    {"d1 1x1",                   FA_FLOAT16,  1, 1, 1,  1,    1,    1,  0, 0, 0, 0, 1},
    {"d1 128x1025 causal",       FA_BFLOAT16, 1, 2, 2,  128,  1025, 1,  1, 0, 0, 0, 1},
    {"d80 128x128 causal",       FA_BFLOAT16, 3, 2, 2,  128,  128,  80, 1, 0, 0, 0, 0},
    {"d200 1025x1025",           FA_FLOAT16,  1, 1, 1,  1025, 1025, 200, 0, 0, 0, 0, 1},
    {"d100 pad4 97x1025 causal", FA_BFLOAT16, 1, 2, 2,  97,   1025, 100, 1, 0, 4, 0, 1},
    {"bnhd d64 128x1025 gqa",    FA_FLOAT16,  2, 4, 2,  128,  1025, 64, 0, 1, 0, 0, 1},
    {"bnhd d40 1025x17",         FA_BFLOAT16, 1, 2, 2,  1025, 17,   40, 0, 1, 0, 0, 0},
    {"bnhd d17 17x128 causal",   FA_FLOAT16,  1, 2, 2,  17,   128,  17, 1, 1, 0, 0, 1},
    {"misaligned d128 128 causal", FA_BFLOAT16, 1, 2, 2, 128, 128,  128, 1, 0, 0, 1, 1},
    {"misaligned d64 17x1025",   FA_FLOAT16,  2, 2, 1,  17,   1025, 64, 0, 0, 0, 1, 0},
};

#define CUDA_OK(call)                                                                     \
    do {                                                                                  \
        cudaError_t err_ = (call);                                                        \
        if (err_ != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
            exit(2);                                                                      \
        }                                                                                 \
    } while (0)

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

static uint16_t to_bits(float x, fa_dtype dt)
{
    if (dt == FA_FLOAT16) {
        __half h = __float2half_rn(x);
        return *(uint16_t *)&h;
    }
    __nv_bfloat16 h = __float2bfloat16_rn(x);
    return *(uint16_t *)&h;
}

static float from_bits(uint16_t u, fa_dtype dt)
{
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

/* Random tensor: host copy of the rounded values (as float) and a device copy at base + off. */
static float *make_input(const layout *l, fa_dtype dt, int off, uint16_t **dev_base)
{
    float *h = (float *)malloc(l->elems * sizeof(float));
    uint16_t *bits = (uint16_t *)malloc(l->elems * sizeof(uint16_t));
    for (int64_t i = 0; i < l->elems; i++) {
        bits[i] = to_bits(rand_normal(), dt);
        h[i] = from_bits(bits[i], dt);
    }
    CUDA_OK(cudaMalloc(dev_base, (l->elems + 8) * sizeof(uint16_t)));
    CUDA_OK(cudaMemcpy(*dev_base + off, bits, l->elems * sizeof(uint16_t), cudaMemcpyHostToDevice));
    free(bits);
    return h;
}

/* Runs one case; returns 1 on pass. */
static int run_case(const test_case *c)
{
    const fa_dtype dt = c->dtype;
    const int off = c->misalign ? 1 : 0;
    const layout lq = make_layout(c, c->Hq, c->Nq), lk = make_layout(c, c->Hkv, c->Nk);
    const layout lo = lq;
    const double scale = (float)(1.0 / sqrt((double)c->d));   /* as the kernel sees it */

    uint16_t *d_q, *d_k, *d_v, *d_o;
    float *d_lse;
    float *h_q = make_input(&lq, dt, off, &d_q);
    float *h_k = make_input(&lk, dt, off, &d_k);
    float *h_v = make_input(&lk, dt, off, &d_v);
    const int64_t n_lse = (int64_t)c->B * c->Hq * c->Nq;
    CUDA_OK(cudaMalloc(&d_o, (lo.elems + off + k_guard) * sizeof(uint16_t)));
    CUDA_OK(cudaMalloc(&d_lse, (n_lse + k_guard) * sizeof(float)));
    CUDA_OK(cudaMemset(d_o, 0xff, (lo.elems + off + k_guard) * sizeof(uint16_t)));   /* NaN */
    CUDA_OK(cudaMemset(d_lse, 0xff, (n_lse + k_guard) * sizeof(float)));            /* NaN */

    fa_params p;
    memset(&p, 0, sizeof p);
    p.q = d_q + off, p.k = d_k + off, p.v = d_v + off, p.o = d_o + off;
    p.lse = c->lse ? d_lse : NULL;
    p.q_batch_stride = lq.sb, p.q_head_stride = lq.sh, p.q_row_stride = lq.sr;
    p.k_batch_stride = lk.sb, p.k_head_stride = lk.sh, p.k_row_stride = lk.sr;
    p.v_batch_stride = lk.sb, p.v_head_stride = lk.sh, p.v_row_stride = lk.sr;
    p.o_batch_stride = lo.sb, p.o_head_stride = lo.sh, p.o_row_stride = lo.sr;
    p.B = c->B, p.Hq = c->Hq, p.Hkv = c->Hkv, p.Nq = c->Nq, p.Nk = c->Nk, p.d = c->d;
    p.scale = (float)scale;
    p.causal = c->causal;
    p.dtype = dt;

    const int st = fa_sm80_forward(&p, 0);
    CUDA_OK(cudaDeviceSynchronize());

    uint16_t *o_bits = (uint16_t *)malloc((lo.elems + off + k_guard) * sizeof(uint16_t));
    float *lse = (float *)malloc((n_lse + k_guard) * sizeof(float));
    CUDA_OK(cudaMemcpy(o_bits, d_o, (lo.elems + off + k_guard) * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(lse, d_lse, (n_lse + k_guard) * sizeof(float), cudaMemcpyDeviceToHost));

    /* fp16 rounds O to 11 bits, bf16 to 8; P is rounded the same way before P V. */
    const double tol = dt == FA_FLOAT16 ? 4e-3 : 2e-2;
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
                    const double got = from_bits(o_bits[off + at], dt);
                    valid[at] = 1;
                    const double err = isnan(got) ? INFINITY : fabs(got - ref);
                    err_o = err > err_o ? err : err_o;
                    const double norm = err / (1 + fabs(ref));
                    worst = norm > worst ? norm : worst;
                }
                if (c->lse) {
                    const double ref = m + log(l);
                    const double got = lse[((int64_t)b * c->Hq + h) * c->Nq + i];
                    const double err = isnan(got) ? INFINITY : fabs(got - ref);
                    err_lse = err > err_lse ? err : err_lse;
                }
            }
        }
    for (int64_t e = 0; e < lo.elems; e++)        /* row padding must stay poisoned */
        bad_guard |= !valid[e] && o_bits[off + e] != 0xffff;
    for (int e = 0; e < k_guard; e++) {
        bad_guard |= o_bits[off + lo.elems + e] != 0xffff;
        uint32_t u;
        memcpy(&u, &lse[n_lse + e], 4);
        bad_guard |= u != 0xffffffffu;
    }

    const int pass = st == FA_OK && worst <= tol && err_lse <= 1e-3 && !bad_guard;
    printf("%-28s %s  status %d  max|o-ref| %.2e (tol %.0e·(1+|ref|))  max|lse-ref| %.2e%s  %s\n",
           c->name, dt == FA_FLOAT16 ? "fp16" : "bf16", st, err_o, tol, err_lse,
           bad_guard ? "  WROTE OUTSIDE o/lse" : "", pass ? "PASS" : "FAIL");

    free(s), free(acc), free(valid), free(o_bits), free(lse), free(h_q), free(h_k), free(h_v);
    CUDA_OK(cudaFree(d_q));
    CUDA_OK(cudaFree(d_k));
    CUDA_OK(cudaFree(d_v));
    CUDA_OK(cudaFree(d_o));
    CUDA_OK(cudaFree(d_lse));
    return pass;
}

int main(void)
{
    int dev;
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaGetDeviceProperties(&prop, dev));
    printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);

    int passed = 0, failed = 0;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        if (run_case(&k_cases[i]))
            passed++;
        else
            failed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
