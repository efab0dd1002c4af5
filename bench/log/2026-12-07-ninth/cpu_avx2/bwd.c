/* forward then backward, fp32, (1, H, N, d); times the backward; OUTF dumps dq, dk, dv. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include "fa.h"
static fa_variants vars(void) { fa_variants v; memset(&v, 0, sizeof v); v.softcap = getenv("SOFTCAP") ? (float)atof(getenv("SOFTCAP")) : 0.0f; return v; }
static double now(void){ struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static float rnd(void) { return rand() / (float)RAND_MAX - .5f; }
int main(int argc, char **argv)
{
    const fa_variants fv = vars();
    int64_t H = argc > 4 ? atoll(argv[4]) : 8, N = argc > 1 ? atoll(argv[1]) : 1024, d = argc > 2 ? atoll(argv[2]) : 64;
    int causal = argc > 3 ? atoi(argv[3]) : 0;
    int reps = getenv("REPS") ? atoi(getenv("REPS")) : 5;
    size_t n = (size_t)H * N * d;
    float *q = malloc(n * 4), *k = malloc(n * 4), *v = malloc(n * 4), *o = malloc(n * 4), *g = malloc(n * 4);
    float *dq = malloc(n * 4), *dk = malloc(n * 4), *dv = malloc(n * 4), *lse = malloc(H * N * 4);
    srand(1);
    for (size_t i = 0; i < n; i++) { q[i] = rnd(); k[i] = rnd(); v[i] = rnd(); g[i] = rnd(); }
    fa_backward_params bp; memset(&bp, 0, sizeof bp);
    fa_params *p = &bp.p;
    p->q = q; p->k = k; p->v = v; p->o = o; p->lse = lse; p->dtype = FA_FLOAT32;
    p->B = 1; p->Hq = p->Hkv = H; p->Nq = p->Nk = N; p->d = d;
    p->scale = getenv("SCALE") ? (float)atof(getenv("SCALE")) : 1.0f / sqrtf((float)d); p->causal = causal;
    p->q_batch_stride = p->k_batch_stride = p->v_batch_stride = p->o_batch_stride = H * N * d;
    p->q_head_stride = p->k_head_stride = p->v_head_stride = p->o_head_stride = N * d;
    p->q_row_stride = p->k_row_stride = p->v_row_stride = p->o_row_stride = d;
    int st = fa_forward_variants_cpu(p, &fv);
    bp.dout = g; bp.dq = dq; bp.dk = dk; bp.dv = dv;
    bp.do_batch_stride = bp.dq_batch_stride = bp.dk_batch_stride = bp.dv_batch_stride = H * N * d;
    bp.do_head_stride = bp.dq_head_stride = bp.dk_head_stride = bp.dv_head_stride = N * d;
    bp.do_row_stride = bp.dq_row_stride = bp.dk_row_stride = bp.dv_row_stride = d;
    st |= fa_backward_cpu(&bp, &fv);
    double best = 1e9;
    for (int r = 0; r < reps; r++) { double t0 = now(); st |= fa_backward_cpu(&bp, &fv); double t = now() - t0; best = t < best ? t : best; }
    double cs = 0; for (size_t i = 0; i < n; i++) cs += dq[i] + dk[i] + dv[i];
    { FILE *f = fopen(getenv("OUTF") ? getenv("OUTF") : "/dev/null", "wb"); fwrite(dq, 4, n, f); fwrite(dk, 4, n, f); fwrite(dv, 4, n, f); fclose(f); }
    printf("bwd status %d  N %lld d %lld causal %d H %lld: %.2f ms, checksum %.9g\n", st, (long long)N, (long long)d, causal, (long long)H, best * 1e3, cs);
    return 0;
}
