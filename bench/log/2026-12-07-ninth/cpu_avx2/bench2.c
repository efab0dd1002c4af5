#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include "fa.h"
static fa_variants vars(void) { fa_variants v; memset(&v, 0, sizeof v); v.softcap = getenv("SOFTCAP") ? (float)atof(getenv("SOFTCAP")) : 0.0f; return v; }
static double now(void){ struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char **argv)
{
    const fa_variants fv = vars();
    int64_t H = 8, N = argc > 1 ? atoll(argv[1]) : 1024, d = argc > 2 ? atoll(argv[2]) : 64;
    int causal = argc > 3 ? atoi(argv[3]) : 0;
    size_t n = (size_t)H * N * d;
    float *q = malloc(n * 4), *k = malloc(n * 4), *v = malloc(n * 4), *o = malloc(n * 4);
    srand(1);
    for (size_t i = 0; i < n; i++) { q[i] = rand() / (float)RAND_MAX - .5f; k[i] = rand() / (float)RAND_MAX - .5f; v[i] = rand() / (float)RAND_MAX - .5f; }
    fa_params p; memset(&p, 0, sizeof p);
    p.q = q; p.k = k; p.v = v; p.o = o; p.dtype = FA_FLOAT32;
    p.B = 1; p.Hq = p.Hkv = H; p.Nq = p.Nk = N; p.d = d; p.scale = getenv("SCALE") ? (float)atof(getenv("SCALE")) : 1.0f / sqrtf((float)d); p.causal = causal;
    p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = p.o_batch_stride = H * N * d;
    p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = N * d;
    p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = d;
    int st = fa_forward_variants_cpu(&p, &fv);
    double best = 1e9;
    int reps = getenv("REPS") ? atoi(getenv("REPS")) : 3; for (int r = 0; r < reps; r++) { double t0 = now(); st |= fa_forward_variants_cpu(&p, &fv); double t = now() - t0; best = t < best ? t : best; }
    double fl = 4.0 * H * N * N * d / (causal ? 2 : 1);
    double cs = 0; for (size_t i = 0; i < n; i++) cs += o[i];
    { FILE *f = fopen(getenv("OUTF") ? getenv("OUTF") : "/dev/null", "wb"); fwrite(o, 4, n, f); fclose(f); }
    printf("status %d  N %lld d %lld causal %d: %.1f ms, %.1f GFLOP/s, checksum %.9g\n", st, (long long)N, (long long)d, causal, best * 1e3, fl / best / 1e9, cs);
    return 0;
}
