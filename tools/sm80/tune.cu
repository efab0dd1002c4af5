/*
 * tune.cu — builds, checks and times tile variants of the tensor-core kernel (csrc/cuda/sm80.cu)
 * in one GPU run, next to the production tiles (the first kernel's figures are in bench/LOG.md).
 *
 * Every variant of TUNE_VARIANTS is compiled in its own translation unit (-DTUNE_PART=i, without
 * the production entry point) so that nvcc runs them in parallel; the unit without TUNE_PART
 * holds main(), the production entry point and the checks. run.sh does all of it:
 *
 *     bash tools/sm80/run.sh                      # on the H200; ~1 min build, ~1 min run
 *     /tmp/sm80_tune/tune [--ref sdpa.txt] [--reps 30]
 *
 * Checks (bf16 only: the variants are built for bf16): awkward shapes per head-dim width (padded
 * d, Nq != Nk both ways, causal, GQA, misaligned rows, scale 0 and < 0) against a float64 host
 * reference, outputs poisoned with NaN and guarded past their end. Timing: FlashAttention's grid
 * (bf16, B·N = 16384 tokens, H·d = 2048, N in {1k, 4k, 16k}, causal and not), CUDA events around
 * each call, median of --reps after warm-up, TFLOP/s = 4·B·H·N²·d / t (halved when causal). With
 * --ref (lines "flash|cudnn d N causal tflops", from sdpa.py) it also prints the ratio to SDPA
 * flash and the geometric mean per candidate.
 */
#include <algorithm>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#ifdef TUNE_PART
#define FA_SM80_NO_ENTRY
#endif
#include "../../csrc/cuda/sm80.cu"
#include "../cuda_ok.h"

/* The variants: sm80_tile<D, BM, BN, WARPS, STAGES, MIN_CTAS, Q_IN_REGS>. The production tiles
 * (sm80_tile_d64/128/256) are timed through fa_sm80_forward and must not be repeated here. */
#define TUNE_VARIANTS(X)                                                                    \
    X(0, sm80_tile< 64, 128,  64, 4, 2, 2, true >)  /* Q in registers, 2 CTAs/SM */         \
    X(1, sm80_tile< 64, 128, 128, 4, 1, 2, false>)  /* one stage: 48 KB */                  \
    X(2, sm80_tile< 64, 128,  64, 4, 2, 2, false>)  /* BN 64 */                             \
    X(3, sm80_tile< 64, 128,  64, 8, 2, 1, false>)  /* 16 rows/warp, 8 warps */             \
    X(4, sm80_tile<128, 128,  64, 4, 1, 2, false>)  /* one stage: 64 KB (FA2's tile) */     \
    X(5, sm80_tile<128, 128,  32, 4, 2, 2, false>)  /* BN 32 */                             \
    X(6, sm80_tile<128, 128,  64, 8, 2, 1, false>)  /* 16 rows/warp, 8 warps */             \
    X(7, sm80_tile<128,  64,  64, 2, 1, 4, false>)  /* 2 warps, 4 CTAs/SM: 48 KB each */    \
    X(8, sm80_tile<256, 128,  64, 8, 1, 1, false>)  /* FA2's A100 tile: 128 KB */           \
    X(9, sm80_tile<256,  64,  32, 4, 2, 2, false>)  /* the first kernel's tile */                 \
    X(10, sm80_tile<256, 128, 64, 8, 2, 1, false>)  /* two stages: 192 KB */                \
    X(11, sm80_tile<256, 128, 32, 8, 2, 1, false>)  /* 128 KB */                           \
    X(12, sm80_tile< 64, 128, 128, 4, 2, 2, false, false>) /* production, per-chunk loads */ \
    X(13, sm80_tile<128, 128,  64, 4, 2, 2, false, false>) /* production, per-chunk loads */ \
    X(14, sm80_tile<256,  64,  64, 4, 1, 2, false, false>) /* production, per-chunk loads */

template <int I> struct tune_variant;
#define TUNE_TYPEDEF(I, ...) template <> struct tune_variant<I> { typedef __VA_ARGS__ tile; };
TUNE_VARIANTS(TUNE_TYPEDEF)

#define TUNE_CAT_(a, b) a##b
#define TUNE_CAT(a, b) TUNE_CAT_(a, b)

#ifdef TUNE_PART

/* This unit's variant, bf16 only. */
extern "C" int TUNE_CAT(tune_run_, TUNE_PART)(const fa_params *p, cudaStream_t stream)
{
    typedef tune_variant<TUNE_PART>::tile C;
    sm80_args a;
    const int st = sm80_prepare(p, &a);
    if (st != FA_OK)
        return st;
    if (p->dtype != FA_BFLOAT16 || p->d > C::D)
        return FA_ERR_UNSUPPORTED;
    return sm80_launch<__nv_bfloat16, C>(&a, stream);
}

#else /* main unit */

#define TUNE_DECLARE(I, ...) extern "C" int tune_run_##I(const fa_params *p, cudaStream_t stream);
TUNE_VARIANTS(TUNE_DECLARE)

/* A candidate: a launcher and the head-dim width it serves. */
typedef struct {
    char name[64];
    int (*run)(const fa_params *p, cudaStream_t stream);
    int width;
} candidate;

template <class C>
static candidate make_candidate(const char *tag, int (*run)(const fa_params *, cudaStream_t))
{
    candidate c;
    snprintf(c.name, sizeof c.name, "%s %dx%d w%d s%d m%d%s", tag, C::BM, C::BN, C::WARPS,
             C::STAGES, C::MIN_CTAS, C::Q_IN_REGS ? " qreg" : "");
    c.run = run, c.width = C::D;
    return c;
}

static std::vector<candidate> all_candidates(void)
{
    std::vector<candidate> v;
    v.push_back(make_candidate<sm80_tile_d64>("prod", fa_sm80_forward));
    v.push_back(make_candidate<sm80_tile_d128>("prod", fa_sm80_forward));
    v.push_back(make_candidate<sm80_tile_d256>("prod", fa_sm80_forward));
#define TUNE_PUSH(I, ...) v.push_back(make_candidate<tune_variant<I>::tile>("v" #I, tune_run_##I));
    TUNE_VARIANTS(TUNE_PUSH)
    return v;
}

/* ---- Checks -------------------------------------------------------------------------------- */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static float rand_normal(void)
{
    double u[2];
    for (int i = 0; i < 2; i++) {
        g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
        u[i] = ((g_rng >> 11) + 0.5) / 9007199254740992.0;
    }
    return (float)(sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]));
}

static uint16_t bf16_bits(float x)
{
    __nv_bfloat16 h = __float2bfloat16_rn(x);
    return *(uint16_t *)&h;
}

static float bf16_float(uint16_t u)
{
    return __bfloat162float(*(__nv_bfloat16 *)&u);
}

typedef struct {
    int B, Hq, Hkv, Nq, Nk, d, causal, misalign;
    float scale;                     /* 0: 1/sqrt(d) */
    int exact_scale_zero;            /* scale really is 0 */
} check_case;

/* One case's inputs (contiguous (B, H, N, d), device copies moved by misalign elements), and the
 * float64 reference o and lse, computed once and shared by every candidate. */
typedef struct {
    check_case c;
    float scale;
    std::vector<float> q, k, v;
    uint16_t *d_q, *d_k, *d_v;
    std::vector<double> o_ref, lse_ref;
} check_input;

static uint16_t *upload(std::vector<float> &x, int off)
{
    std::vector<uint16_t> bits(x.size());
    for (size_t i = 0; i < x.size(); i++) {
        bits[i] = bf16_bits(rand_normal());
        x[i] = bf16_float(bits[i]);
    }
    uint16_t *d;
    CUDA_OK(cudaMalloc(&d, (x.size() + 8) * 2));
    CUDA_OK(cudaMemcpy(d + off, bits.data(), x.size() * 2, cudaMemcpyHostToDevice));
    return d;
}

static check_input make_input(const check_case &c)
{
    check_input in;
    in.c = c;
    in.scale = c.exact_scale_zero ? 0.f : c.scale != 0.f ? c.scale : (float)(1.0 / sqrt((double)c.d));
    in.q.resize((size_t)c.B * c.Hq * c.Nq * c.d);
    in.k.resize((size_t)c.B * c.Hkv * c.Nk * c.d);
    in.v.resize(in.k.size());
    in.d_q = upload(in.q, c.misalign), in.d_k = upload(in.k, c.misalign);
    in.d_v = upload(in.v, c.misalign);
    in.o_ref.assign(in.q.size(), 0.0);
    in.lse_ref.assign((size_t)c.B * c.Hq * c.Nq, 0.0);
    std::vector<double> s(c.Nk);
    for (int b = 0; b < c.B; b++)
        for (int h = 0; h < c.Hq; h++) {
            const int hk = h / (c.Hq / c.Hkv);
            for (int i = 0; i < c.Nq; i++) {
                const size_t qi = (((size_t)b * c.Hq + h) * c.Nq + i) * c.d;
                const int n_keys = c.causal ? std::min(i + 1, c.Nk) : c.Nk;
                double m = -INFINITY, l = 0;
                for (int j = 0; j < n_keys; j++) {
                    const size_t kj = (((size_t)b * c.Hkv + hk) * c.Nk + j) * c.d;
                    double dot = 0;
                    for (int e = 0; e < c.d; e++)
                        dot += (double)in.q[qi + e] * in.k[kj + e];
                    s[j] = dot * in.scale;
                    m = std::max(m, s[j]);
                }
                for (int j = 0; j < n_keys; j++) {
                    const size_t kj = (((size_t)b * c.Hkv + hk) * c.Nk + j) * c.d;
                    const double pj = exp(s[j] - m);
                    l += pj;
                    for (int e = 0; e < c.d; e++)
                        in.o_ref[qi + e] += pj * in.v[kj + e];
                }
                for (int e = 0; e < c.d; e++)
                    in.o_ref[qi + e] /= l;
                in.lse_ref[((size_t)b * c.Hq + h) * c.Nq + i] = m + log(l);
            }
        }
    return in;
}

/* Runs one candidate on one case; prints a line on failure and returns 1 on pass. */
static int check_one(const candidate &cand, const check_input &in)
{
    const check_case &c = in.c;
    const int off = c.misalign, guard = 64;
    const size_t n_o = in.q.size(), n_lse = in.lse_ref.size();
    uint16_t *d_o;
    float *d_lse;
    CUDA_OK(cudaMalloc(&d_o, (n_o + off + guard) * 2));
    CUDA_OK(cudaMalloc(&d_lse, (n_lse + guard) * 4));
    CUDA_OK(cudaMemset(d_o, 0xff, (n_o + off + guard) * 2));      /* NaN */
    CUDA_OK(cudaMemset(d_lse, 0xff, (n_lse + guard) * 4));

    fa_params p;
    memset(&p, 0, sizeof p);
    p.q = in.d_q + off, p.k = in.d_k + off, p.v = in.d_v + off, p.o = d_o + off, p.lse = d_lse;
    p.q_row_stride = p.o_row_stride = p.k_row_stride = p.v_row_stride = c.d;
    p.q_head_stride = p.o_head_stride = (int64_t)c.Nq * c.d;
    p.q_batch_stride = p.o_batch_stride = (int64_t)c.Hq * c.Nq * c.d;
    p.k_head_stride = p.v_head_stride = (int64_t)c.Nk * c.d;
    p.k_batch_stride = p.v_batch_stride = (int64_t)c.Hkv * c.Nk * c.d;
    p.B = c.B, p.Hq = c.Hq, p.Hkv = c.Hkv, p.Nq = c.Nq, p.Nk = c.Nk, p.d = c.d;
    p.scale = in.scale, p.causal = c.causal, p.dtype = FA_BFLOAT16;
    const int st = cand.run(&p, 0);
    CUDA_OK(cudaDeviceSynchronize());

    std::vector<uint16_t> o(n_o + off + guard);
    std::vector<float> lse(n_lse + guard);
    CUDA_OK(cudaMemcpy(o.data(), d_o, o.size() * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(lse.data(), d_lse, lse.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaFree(d_o));
    CUDA_OK(cudaFree(d_lse));

    double worst = 0, err_lse = 0;
    for (size_t i = 0; i < n_o; i++) {
        const double got = bf16_float(o[off + i]), ref = in.o_ref[i];
        const double err = isnan(got) ? INFINITY : fabs(got - ref) / (1 + fabs(ref));
        worst = std::max(worst, err);
    }
    for (size_t i = 0; i < n_lse; i++)
        err_lse = std::max(err_lse, isnan(lse[i]) ? INFINITY : fabs(lse[i] - in.lse_ref[i]));
    int bad_guard = 0;
    for (int e = 0; e < guard; e++) {
        uint32_t u;
        memcpy(&u, &lse[n_lse + e], 4);
        bad_guard |= o[off + n_o + e] != 0xffff || u != 0xffffffffu;
    }
    const int pass = st == FA_OK && worst <= 2e-2 && err_lse <= 1e-3 && !bad_guard;
    if (!pass)
        printf("  FAIL %-34s d=%d B=%d Hq=%d Hkv=%d Nq=%d Nk=%d causal=%d misalign=%d scale=%g: "
               "status %d, max|o-ref|/(1+|ref|) %.2e, max|lse-ref| %.2e%s\n",
               cand.name, c.d, c.B, c.Hq, c.Hkv, c.Nq, c.Nk, c.causal, c.misalign, in.scale, st,
               worst, err_lse, bad_guard ? ", wrote past the end" : "");
    return pass;
}

/* ---- Timing -------------------------------------------------------------------------------- */

__global__ void fill_random(uint16_t *x, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
        const float u = (h & 0xffffff) / 16777216.0f - 0.5f;   /* uniform in [-0.5, 0.5) */
        __nv_bfloat16 b = __float2bfloat16_rn(3.4f * u);        /* std ~1 */
        x[i] = *(uint16_t *)&b;
    }
}

/* Median time in ms of reps calls, after warm-up; -1 when the candidate refuses the shape. */
static double time_ms(const candidate &cand, const fa_params *p, int reps)
{
    for (int i = 0; i < 3; i++)
        if (cand.run(p, 0) != FA_OK)
            return -1;
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<cudaEvent_t> ev(2 * reps);
    for (auto &e : ev)
        CUDA_OK(cudaEventCreate(&e));
    for (int i = 0; i < reps; i++) {
        CUDA_OK(cudaEventRecord(ev[2 * i], 0));
        cand.run(p, 0);
        CUDA_OK(cudaEventRecord(ev[2 * i + 1], 0));
    }
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> t(reps);
    for (int i = 0; i < reps; i++)
        CUDA_OK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
    for (auto &e : ev)
        CUDA_OK(cudaEventDestroy(e));
    std::sort(t.begin(), t.end());
    return t[reps / 2];
}

/* SDPA reference figures from --ref: backend, d, N, causal -> TFLOP/s. */
typedef struct { char backend[16]; int d, n, causal; double tflops; } ref_row;

static double ref_lookup(const std::vector<ref_row> &refs, const char *backend, int d, int n, int causal)
{
    for (const ref_row &r : refs)
        if (!strcmp(r.backend, backend) && r.d == d && r.n == n && r.causal == causal)
            return r.tflops;
    return 0;
}

int main(int argc, char **argv)
{
    int reps = 30;
    std::vector<ref_row> refs;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--ref") && i + 1 < argc) {
            FILE *f = fopen(argv[++i], "r");
            ref_row r;
            while (f && fscanf(f, "%15s %d %d %d %lf", r.backend, &r.d, &r.n, &r.causal, &r.tflops) == 5)
                refs.push_back(r);
            if (f)
                fclose(f);
        } else {
            fprintf(stderr, "usage: %s [--reps N] [--ref sdpa.txt]\n", argv[0]);
            return 2;
        }
    }
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s (sm_%d%d, %d SMs), reps %d, %zu SDPA reference rows\n", prop.name,
           prop.major, prop.minor, prop.multiProcessorCount, reps, refs.size());
    const std::vector<candidate> cands = all_candidates();

    /* Checks: every candidate on the cases of its width. */
    int failed = 0;
    std::vector<int> ok(cands.size(), 1);
    const int widths[3] = {64, 128, 256};
    for (int w : widths) {
        const int dp = w - 24;                          /* a padded head dim */
        const check_case cases[] = {
            /* B Hq Hkv  Nq    Nk    d   causal mis scale zero */
            {2, 4, 2, 1025, 1025, w,  1, 0, 0.f, 0},
            {1, 2, 2, 300,  517,  w,  0, 0, 0.f, 0},
            {1, 2, 1, 17,   1025, dp, 1, 0, 0.f, 0},
            {1, 2, 2, 1025, 17,   dp, 1, 0, 0.f, 0},
            {1, 2, 2, 130,  130,  w,  1, 1, 0.f, 0},
            {1, 2, 2, 200,  200,  w,  0, 0, -0.5f, 0},
            {1, 2, 2, 200,  200,  w,  1, 0, 0.f, 1},
        };
        for (const check_case &c : cases) {
            check_input in = make_input(c);
            for (size_t i = 0; i < cands.size(); i++)
                if (cands[i].width == w && !check_one(cands[i], in))
                    ok[i] = 0, failed++;
            CUDA_OK(cudaFree(in.d_q));
            CUDA_OK(cudaFree(in.d_k));
            CUDA_OK(cudaFree(in.d_v));
        }
    }
    for (size_t i = 0; i < cands.size(); i++)
        printf("check d<=%-3d %-36s %s\n", cands[i].width, cands[i].name, ok[i] ? "PASS" : "FAIL");

    /* Timing on FlashAttention's grid; inputs are 64 MB each for every shape. */
    const size_t elems = (size_t)16384 * 2048;
    uint16_t *q, *k, *v, *o;
    CUDA_OK(cudaMalloc(&q, elems * 2));
    CUDA_OK(cudaMalloc(&k, elems * 2));
    CUDA_OK(cudaMalloc(&v, elems * 2));
    CUDA_OK(cudaMalloc(&o, elems * 2));
    fill_random<<<1024, 256>>>(q, elems, 1);
    fill_random<<<1024, 256>>>(k, elems, 2);
    fill_random<<<1024, 256>>>(v, elems, 3);
    CUDA_OK(cudaDeviceSynchronize());

    const int seqs[3] = {1024, 4096, 16384};
    for (int w : widths) {
        printf("\n== d=%d, bf16, B·N = 16384, H·d = 2048: TFLOP/s; geomean (its ratio to SDPA flash) ==\n", w);
        printf("%-38s", "candidate");
        for (int n : seqs)
            for (int causal = 0; causal < 2; causal++)
                printf(" %6dk%s", n / 1024, causal ? "c" : " ");
        printf("  geomean (vs flash)\n");
        for (const char *backend : {"flash", "cudnn"}) {
            if (refs.empty())
                break;
            printf("SDPA %-33s", backend);
            for (int n : seqs)
                for (int causal = 0; causal < 2; causal++)
                    printf(" %8.1f", ref_lookup(refs, backend, w, n, causal));
            printf("\n");
        }
        for (size_t i = 0; i < cands.size(); i++) {
            if (cands[i].width != w)
                continue;
            printf("%-38s", cands[i].name);
            double log_sum = 0, log_ratio = 0;
            int n_pts = 0, n_ratio = 0;
            for (int n : seqs)
                for (int causal = 0; causal < 2; causal++) {
                    fa_params p;
                    memset(&p, 0, sizeof p);
                    const int B = 16384 / n, H = 2048 / w;
                    p.q = q, p.k = k, p.v = v, p.o = o;
                    p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = w;
                    p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = (int64_t)n * w;
                    p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = p.o_batch_stride = (int64_t)H * n * w;
                    p.B = B, p.Hq = p.Hkv = H, p.Nq = p.Nk = n, p.d = w;
                    p.scale = 1.f / sqrtf((float)w), p.causal = causal, p.dtype = FA_BFLOAT16;
                    const double ms = ok[i] ? time_ms(cands[i], &p, reps) : -1;
                    if (ms <= 0) {
                        printf(" %8s", "n/a");
                        continue;
                    }
                    const double tflops = 4.0 * B * H * (double)n * n * w / (causal ? 2 : 1) / (ms * 1e9);
                    const double flash = ref_lookup(refs, "flash", w, n, causal);
                    printf(" %8.1f", tflops);
                    log_sum += log(tflops), n_pts++;
                    if (flash > 0)
                        log_ratio += log(tflops / flash), n_ratio++;
                }
            if (n_pts)
                printf("  %6.1f", exp(log_sum / n_pts));
            if (n_ratio)
                printf(" (%.3f)", exp(log_ratio / n_ratio));
            printf("\n");
            fflush(stdout);
        }
    }
    printf("\n%d check failures\n", failed);
    return failed ? 1 : 0;
}

#endif
