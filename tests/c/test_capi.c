/*
 * test_capi.c — calls the C backend through fa.h alone, with no torch: a plain
 * C11 program built by tests/test_c_api.py (gcc ... csrc/fa_cpu.c
 * csrc/fa_common.c -fopenmp -lm), plainly and under ASan/UBSan. Checks
 * fa_forward_cpu against a naive double-precision softmax(Q Kᵀ · scale) V over
 * a sweep of tile-edge shapes (GQA, causal, Nq != Nk, Nk = 0, d 1..256) and a
 * strided (B, N, H, d) layout, with poisoned outputs and a guard element past
 * the end, and checks the error statuses; then fa_forward_kvcache_cpu (append into
 * ragged caches, per-sequence reference, bad parameters leaving output and
 * caches untouched); then fa_backward_cpu (GQA, causal, a loss using lse) against the gradients
 * computed in double from their formulas, its bad parameters, and the CUDA entry points of a build
 * without CUDA.
 * Prints one line per check and exits non-zero on any failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa.h"

static int failures = 0;

static void check(int ok, const char *what)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    failures += !ok;
}

static float frand(void) { return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f; }

/* Naive reference for one (b, h, i) row in double; strides as in fa_params. */
static double max_error(const fa_params *p)
{
    const float *q = p->q, *k = p->k, *v = p->v, *o = p->o;
    double worst = 0.0;
    double *s = malloc(sizeof(double) * (size_t)p->Nk);
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t h = 0; h < p->Hq; h++)
            for (int64_t i = 0; i < p->Nq; i++) {
                const int64_t hk = h / (p->Hq / p->Hkv);
                const float *qi = q + b * p->q_batch_stride + h * p->q_head_stride + i * p->q_row_stride;
                double m = -INFINITY, l = 0.0;
                const int64_t n_keys = p->causal && i + 1 < p->Nk ? i + 1 : p->Nk;
                for (int64_t j = 0; j < n_keys; j++) {
                    const float *kj = k + b * p->k_batch_stride + hk * p->k_head_stride + j * p->k_row_stride;
                    double dot = 0.0;
                    for (int64_t c = 0; c < p->d; c++) dot += (double)qi[c] * kj[c];
                    s[j] = dot * p->scale;
                    m = s[j] > m ? s[j] : m;
                }
                for (int64_t j = 0; j < n_keys; j++) l += (s[j] = exp(s[j] - m));
                const float *oi = o + b * p->o_batch_stride + h * p->o_head_stride + i * p->o_row_stride;
                for (int64_t c = 0; c < p->d; c++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < n_keys; j++)
                        acc += s[j] * v[b * p->v_batch_stride + hk * p->v_head_stride + j * p->v_row_stride + c];
                    const double err = fabs(acc / l - oi[c]);
                    worst = err > worst ? err : worst;
                }
                if (p->lse != NULL) {
                    const double err = fabs(m + log(l) - p->lse[(b * p->Hq + h) * p->Nq + i]);
                    worst = err > worst ? err : worst;
                }
            }
    free(s);
    return worst;
}

/* One contiguous fp32 problem of the given shape, both masks: status and error against max_error. */
static void sweep_case(int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nk, int64_t d)
{
    const size_t nq = (size_t)(B * Hq * Nq * d), nk = (size_t)(B * Hkv * Nk * d);
    float *q = malloc(sizeof(float) * (nq + 1)), *k = malloc(sizeof(float) * (nk + 1));
    float *v = malloc(sizeof(float) * (nk + 1)), *o = malloc(sizeof(float) * (nq + 1));
    float *lse = malloc(sizeof(float) * (size_t)(B * Hq * Nq + 1));
    for (size_t i = 0; i < nq; i++) q[i] = frand();
    for (size_t i = 0; i < nk; i++) k[i] = frand(), v[i] = frand();
    fa_params p;
    memset(&p, 0, sizeof p);
    p.q = q; p.k = k; p.v = v; p.o = o; p.lse = lse;
    p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = d;
    p.q_head_stride = p.o_head_stride = Nq * d;
    p.k_head_stride = p.v_head_stride = Nk * d;
    p.q_batch_stride = p.o_batch_stride = Hq * Nq * d;
    p.k_batch_stride = p.v_batch_stride = Hkv * Nk * d;
    p.B = B; p.Hq = Hq; p.Hkv = Hkv; p.Nq = Nq; p.Nk = Nk; p.d = d;
    p.scale = 0.7f / sqrtf((float)d);
    p.num_threads = 2;
    char what[160];
    for (int causal = 0; causal <= 1; causal++) {
        p.causal = causal;
        for (size_t i = 0; i <= nq; i++) o[i] = NAN;    /* poison, one element past the end too */
        const int st = fa_forward_cpu(&p);
        const double err = Nk > 0 ? max_error(&p) : 0.0;
        int zeros = 1;   /* Nk == 0: O = 0 */
        for (size_t i = 0; Nk == 0 && i < nq; i++) zeros &= o[i] == 0.0f;
        snprintf(what, sizeof what, "B=%lld Hq=%lld Hkv=%lld Nq=%lld Nk=%lld d=%lld causal=%d: status %d, "
                 "max error %.2e", (long long)B, (long long)Hq, (long long)Hkv, (long long)Nq, (long long)Nk,
                 (long long)d, causal, st, err);
        check(st == FA_OK && err < 1e-5 && zeros && isnan(o[nq]), what);
    }
    free(q); free(k); free(v); free(o); free(lse);
}

/* fa_forward_kvcache_cpu: one new token appended to ragged caches, then one query per sequence
 * (bottom-right causal with Nq = 1 sees all L_b keys), checked per sequence against max_error on
 * the caches' valid prefix; then bad parameters: a status, caches and output untouched. */
static void kvcache_case(void)
{
    const int64_t B = 2, Hq = 4, Hkv = 2, Nmax = 50, d = 40;
    const int32_t seqlens[2] = {10, 48};
    const size_t nc = (size_t)(B * Hkv * Nmax * d), nn = (size_t)(B * Hkv * d), nq = (size_t)(B * Hq * d);
    float *kc = malloc(sizeof(float) * nc), *vc = malloc(sizeof(float) * nc);
    float *kn = malloc(sizeof(float) * nn), *vn = malloc(sizeof(float) * nn);
    float *q = malloc(sizeof(float) * nq), *o = malloc(sizeof(float) * nq);
    for (size_t i = 0; i < nc; i++) kc[i] = frand(), vc[i] = frand();
    for (size_t i = 0; i < nn; i++) kn[i] = frand(), vn[i] = frand();
    for (size_t i = 0; i < nq; i++) q[i] = frand(), o[i] = NAN;

    fa_kvcache_params kp;
    memset(&kp, 0, sizeof kp);
    fa_params *p = &kp.p;
    p->q = q; p->k = kc; p->v = vc; p->o = o;
    p->q_batch_stride = p->o_batch_stride = Hq * d; p->q_head_stride = p->o_head_stride = d;
    p->q_row_stride = p->o_row_stride = d;
    p->k_batch_stride = p->v_batch_stride = Hkv * Nmax * d;
    p->k_head_stride = p->v_head_stride = Nmax * d; p->k_row_stride = p->v_row_stride = d;
    p->B = B; p->Hq = Hq; p->Hkv = Hkv; p->Nq = 1; p->Nk = Nmax; p->d = d;
    p->scale = 1.0f / sqrtf((float)d); p->causal = 1; p->dtype = FA_FLOAT32;
    kp.cache_seqlens = seqlens;
    kp.k_new = kn; kp.v_new = vn; kp.Nnew = 1;
    kp.kn_batch_stride = kp.vn_batch_stride = Hkv * d; kp.kn_head_stride = kp.vn_head_stride = d;
    kp.kn_row_stride = kp.vn_row_stride = d;

    char what[128];
    const int st = fa_forward_kvcache_cpu(&kp);
    check(st == FA_OK, "fa_forward_kvcache_cpu: status");
    for (int64_t b = 0; b < B; b++) {
        const int64_t L = seqlens[b] + 1;
        int appended = 1;
        for (int64_t h = 0; h < Hkv; h++)
            for (int64_t c = 0; c < d; c++)
                appended &= kc[b * Hkv * Nmax * d + h * Nmax * d + seqlens[b] * d + c] == kn[b * Hkv * d + h * d + c]
                         && vc[b * Hkv * Nmax * d + h * Nmax * d + seqlens[b] * d + c] == vn[b * Hkv * d + h * d + c];
        fa_params pb = *p;   /* sequence b alone over its L valid keys */
        pb.B = 1; pb.Nk = L; pb.causal = 0;
        pb.q = q + b * Hq * d; pb.o = o + b * Hq * d;
        pb.k = kc + b * Hkv * Nmax * d; pb.v = vc + b * Hkv * Nmax * d;
        const double err = max_error(&pb);
        snprintf(what, sizeof what, "kvcache sequence %d (L = %d): appended %d, max error %.2e", (int)b, (int)L,
                 appended, err);
        check(appended && err < 1e-5, what);
    }

    /* Bad parameters. */
    float *kc_copy = malloc(sizeof(float) * nc);
    memcpy(kc_copy, kc, sizeof(float) * nc);
    o[0] = 12345.0f;
    const int32_t too_long[2] = {10, (int32_t)Nmax};   /* + 1 new row > Nmax */
    fa_kvcache_params bad = kp;
    bad.cache_seqlens = too_long;
    check(fa_forward_kvcache_cpu(&bad) == FA_ERR_SEQLEN, "cache_seqlens + Nnew > Nmax -> FA_ERR_SEQLEN");
    const int32_t negative[2] = {-1, 3};
    bad = kp; bad.cache_seqlens = negative;
    check(fa_forward_kvcache_cpu(&bad) == FA_ERR_SEQLEN, "cache_seqlens < 0 -> FA_ERR_SEQLEN");
    bad = kp; bad.v_new = NULL;
    check(fa_forward_kvcache_cpu(&bad) == FA_ERR_NULL_POINTER, "k_new without v_new -> FA_ERR_NULL_POINTER");
    bad = kp; bad.Nnew = -1;
    check(fa_forward_kvcache_cpu(&bad) == FA_ERR_BAD_SIZE, "Nnew = -1 -> FA_ERR_BAD_SIZE");
    bad = kp; bad.kn_row_stride = -4;
    check(fa_forward_kvcache_cpu(&bad) == FA_ERR_BAD_STRIDE, "negative k_new stride -> FA_ERR_BAD_STRIDE");
    bad = kp; bad.p.Hkv = 3;
    check(fa_forward_kvcache_cpu(&bad) == FA_ERR_GQA, "Hq = 4, Hkv = 3 -> FA_ERR_GQA");
    bad = kp; bad.k_new = kc + 2 * d + 1;               /* read from the rows the append writes */
    check(fa_forward_kvcache_cpu(&bad) == FA_ERR_BAD_STRIDE, "k_new inside k_cache -> FA_ERR_BAD_STRIDE");
    bad = kp; bad.v_new = kc + nc - d;                  /* another cache's last row */
    check(fa_forward_kvcache_cpu(&bad) == FA_ERR_BAD_STRIDE, "v_new inside k_cache -> FA_ERR_BAD_STRIDE");
    check(fa_forward_kvcache_cpu(NULL) == FA_ERR_NULL_POINTER, "kvcache params = NULL -> FA_ERR_NULL_POINTER");
    check(o[0] == 12345.0f && memcmp(kc, kc_copy, sizeof(float) * nc) == 0,
          "rejected kvcache calls wrote neither the output nor the caches");
    free(kc_copy);
    free(kc); free(vc); free(kn); free(vn); free(q); free(o);
}

/* fa_backward_cpu on a causal GQA problem (fp32), a loss Σ O·dO + Σ lse·dlse: dQ, dK, dV against
 * the formulas in double (P from the exact softmax; dS = P (dP − Σ P dP + dlse); dK, dV summed over
 * the group). */
static void backward_case(void)
{
    enum { B = 1, Hq = 4, Hkv = 2, Nq = 9, Nk = 13, d = 8 };
    const int64_t G = Hq / Hkv;
    static float q[B * Hq * Nq * d], k[B * Hkv * Nk * d], v[B * Hkv * Nk * d], o[B * Hq * Nq * d], lse[B * Hq * Nq];
    static float dout[B * Hq * Nq * d], dlse[B * Hq * Nq], dq[B * Hq * Nq * d], dk[B * Hkv * Nk * d], dv[B * Hkv * Nk * d];
    for (int i = 0; i < B * Hq * Nq * d; i++) q[i] = frand(), dout[i] = frand();
    for (int i = 0; i < B * Hkv * Nk * d; i++) k[i] = frand(), v[i] = frand();
    for (int i = 0; i < B * Hq * Nq; i++) dlse[i] = frand();

    fa_backward_params bp;
    memset(&bp, 0, sizeof bp);
    fa_params *p = &bp.p;
    p->q = q; p->k = k; p->v = v; p->o = o; p->lse = lse;
    p->q_batch_stride = Hq * Nq * d; p->q_head_stride = Nq * d; p->q_row_stride = d;
    p->k_batch_stride = Hkv * Nk * d; p->k_head_stride = Nk * d; p->k_row_stride = d;
    p->v_batch_stride = Hkv * Nk * d; p->v_head_stride = Nk * d; p->v_row_stride = d;
    p->o_batch_stride = Hq * Nq * d; p->o_head_stride = Nq * d; p->o_row_stride = d;
    p->B = B; p->Hq = Hq; p->Hkv = Hkv; p->Nq = Nq; p->Nk = Nk; p->d = d;
    p->scale = 0.3f; p->causal = 1; p->dtype = FA_FLOAT32;
    check(fa_forward_cpu(p) == FA_OK, "backward: the forward");
    bp.dout = dout; bp.dlse = dlse;
    bp.do_batch_stride = Hq * Nq * d; bp.do_head_stride = Nq * d; bp.do_row_stride = d;
    bp.dq = dq; bp.dk = dk; bp.dv = dv;
    bp.dq_batch_stride = Hq * Nq * d; bp.dq_head_stride = Nq * d; bp.dq_row_stride = d;
    bp.dk_batch_stride = bp.dv_batch_stride = Hkv * Nk * d;
    bp.dk_head_stride = bp.dv_head_stride = Nk * d;
    bp.dk_row_stride = bp.dv_row_stride = d;
    const int st = fa_backward_cpu(&bp, NULL);

    static double rq[Hq * Nq * d], rk[Hkv * Nk * d], rv[Hkv * Nk * d];
    memset(rk, 0, sizeof rk);
    memset(rv, 0, sizeof rv);
    for (int64_t h = 0; h < Hq; h++)
        for (int64_t i = 0; i < Nq; i++) {
            const int64_t hk = h / G, n = i + 1 < Nk ? i + 1 : Nk;   /* top-left causal */
            const float *qi = q + (h * Nq + i) * d, *gi = dout + (h * Nq + i) * d;
            double s[Nk], dp[Nk], m = -INFINITY, l = 0.0, D = 0.0;
            for (int64_t j = 0; j < n; j++) {
                double dot = 0.0, dpj = 0.0;
                for (int64_t c = 0; c < d; c++) {
                    dot += (double)qi[c] * k[(hk * Nk + j) * d + c];
                    dpj += (double)gi[c] * v[(hk * Nk + j) * d + c];
                }
                s[j] = dot * p->scale, dp[j] = dpj;
                m = s[j] > m ? s[j] : m;
            }
            for (int64_t j = 0; j < n; j++) l += exp(s[j] - m);
            for (int64_t j = 0; j < n; j++) s[j] = exp(s[j] - m) / l, D += s[j] * dp[j];   /* s: P */
            for (int64_t c = 0; c < d; c++) rq[(h * Nq + i) * d + c] = 0.0;
            for (int64_t j = 0; j < n; j++) {
                const double ds = s[j] * (dp[j] - D + dlse[h * Nq + i]) * p->scale;
                for (int64_t c = 0; c < d; c++) {
                    rq[(h * Nq + i) * d + c] += ds * k[(hk * Nk + j) * d + c];
                    rk[(hk * Nk + j) * d + c] += ds * qi[c];
                    rv[(hk * Nk + j) * d + c] += s[j] * gi[c];
                }
            }
        }
    double err = 0.0;
    for (int i = 0; i < Hq * Nq * d; i++) err = fmax(err, fabs(rq[i] - dq[i]));
    for (int i = 0; i < Hkv * Nk * d; i++) err = fmax(err, fmax(fabs(rk[i] - dk[i]), fabs(rv[i] - dv[i])));
    char what[128];
    snprintf(what, sizeof what, "fa_backward_cpu causal GQA with dlse: status %d, max error %.2e", st, err);
    check(st == FA_OK && err < 1e-5, what);

    fa_backward_params bad = bp;
    bad.dq_row_stride = -1;
    check(fa_backward_cpu(&bad, NULL) == FA_ERR_BAD_STRIDE, "backward: negative dq stride -> FA_ERR_BAD_STRIDE");
    bad = bp; bad.dout = NULL;
    check(fa_backward_cpu(&bad, NULL) == FA_ERR_NULL_POINTER, "backward: dout = NULL -> FA_ERR_NULL_POINTER");
    bad = bp; bad.p.Hkv = 3;
    check(fa_backward_cpu(&bad, NULL) == FA_ERR_GQA, "backward: Hq = 4, Hkv = 3 -> FA_ERR_GQA");
    size_t bytes = 1;
    check(fa_backward_workspace_bytes(&bp, NULL, &bytes) == FA_ERR_NO_CUDA && bytes == 0,
          "fa_backward_workspace_bytes without CUDA -> FA_ERR_NO_CUDA, 0 bytes");
    check(fa_backward_cuda(&bp, NULL, NULL, 0, NULL) == FA_ERR_NO_CUDA, "fa_backward_cuda without CUDA -> FA_ERR_NO_CUDA");
}

/* A window bounded on both sides sizes the backward's score tiles by its width, not by Nk: the
 * gradients must be those of the same band given as a bool mask over every key (a tile one MR block
 * short gives 0.92 apart). Bottom-right, Nq != Nk, two query heads on one kv head. */
static void window_backward_case(void)
{
    enum { Hq = 2, Nq = 150, Nk = 260, d = 8, left = 5, right = 3 };
    const int64_t delta = Nk - Nq;
    static float q[Hq * Nq * d], k[Nk * d], v[Nk * d], o[Hq * Nq * d], lse[Hq * Nq], dout[Hq * Nq * d];
    static float dq[2][Hq * Nq * d], dk[2][Nk * d], dv[2][Nk * d];
    static uint8_t band[Nq * Nk];
    for (int i = 0; i < Hq * Nq * d; i++) q[i] = frand(), dout[i] = frand();
    for (int i = 0; i < Nk * d; i++) k[i] = frand(), v[i] = frand();
    for (int64_t i = 0; i < Nq; i++)
        for (int64_t j = 0; j < Nk; j++)
            band[i * Nk + j] = j >= i + delta - left && j <= i + delta + right;
    fa_variants w[2];
    memset(w, 0, sizeof w);
    w[0].align = FA_ALIGN_BOTTOM_RIGHT; w[0].window = 1; w[0].window_left = left; w[0].window_right = right;
    w[1].mask = band; w[1].mask_kind = FA_MASK_BOOL; w[1].mask_row_stride = Nk; w[1].mask_col_stride = 1;
    int ok = 1;
    for (int c = 0; c < 2; c++) {
        fa_backward_params bp;
        memset(&bp, 0, sizeof bp);
        fa_params *p = &bp.p;
        p->q = q; p->k = k; p->v = v; p->o = o; p->lse = lse;
        p->q_head_stride = p->o_head_stride = Nq * d; p->q_row_stride = p->o_row_stride = d;
        p->k_row_stride = p->v_row_stride = d;
        p->B = 1; p->Hq = Hq; p->Hkv = 1; p->Nq = Nq; p->Nk = Nk; p->d = d; p->scale = 0.4f; p->dtype = FA_FLOAT32;
        bp.dout = dout; bp.do_head_stride = bp.dq_head_stride = Nq * d; bp.do_row_stride = bp.dq_row_stride = d;
        bp.dq = dq[c]; bp.dk = dk[c]; bp.dv = dv[c]; bp.dk_row_stride = bp.dv_row_stride = d;
        ok &= fa_forward_variants_cpu(p, &w[c]) == FA_OK && fa_backward_cpu(&bp, &w[c]) == FA_OK;
    }
    double err = 0.0;
    for (int i = 0; i < Hq * Nq * d; i++) err = fmax(err, fabs(dq[0][i] - dq[1][i]));
    for (int i = 0; i < Nk * d; i++) err = fmax(err, fmax(fabs(dk[0][i] - dk[1][i]), fabs(dv[0][i] - dv[1][i])));
    char what[128];
    snprintf(what, sizeof what, "backward, window (%d, %d) over %d keys = its band as a mask: max difference %.2e",
             left, right, Nk, err);
    check(ok && err < 1e-5, what);
}

/* Hostile parameters that once passed the checks: each gets its status, and nothing is written
 * where it is an error; the legal ones their right answer. */
static void hostile_case(void)
{
    enum { d = 4 };
    static float q[2 * 2 * d], k[8 * d], v[8 * d], o[2 * 2 * d], lse[4], dq[2 * 2 * d], dk[8 * d], dv[8 * d];
    for (int i = 0; i < 8 * d; i++) k[i] = frand(), v[i] = (float)(i % d + 1);
    for (int i = 0; i < 2 * 2 * d; i++) q[i] = frand();
    fa_params p;
    memset(&p, 0, sizeof p);
    p.q = q; p.k = k; p.v = v; p.o = o; p.lse = lse;
    p.B = 1; p.Hq = 1; p.Hkv = 1; p.Nq = 1; p.Nk = 1; p.d = d; p.scale = 0.5f; p.dtype = FA_FLOAT32;
    p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = d;
    p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = 2 * d;
    p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = p.o_batch_stride = 4 * d;

    /* A window side of INT64_MAX is unbounded (i + δ ± side once overflowed: every row came out 0). */
    fa_variants w;
    memset(&w, 0, sizeof w);
    w.window = 1; w.window_left = -1; w.window_right = INT64_MAX;
    check(fa_forward_variants_cpu(&p, &w) == FA_OK && o[0] == 1.0f && o[3] == 4.0f, "window INT64_MAX: unbounded");
    fa_params t = p;
    t.Nq = 2; t.Nk = 1; w.align = FA_ALIGN_BOTTOM_RIGHT; w.window_left = INT64_MAX; w.window_right = -1;
    check(fa_forward_variants_cpu(&t, &w) == FA_OK && o[d] == 1.0f, "bottom-right window_left INT64_MAX: unbounded");

    o[0] = 12345.0f;
    t = p; t.scale = 3e38f;  check(fa_forward_cpu(&t) == FA_ERR_SCALE, "scale 3e38 -> FA_ERR_SCALE");
    memset(&w, 0, sizeof w); w.softcap = 3e38f;
    check(fa_forward_variants_cpu(&p, &w) == FA_ERR_VARIANT, "softcap 3e38 -> FA_ERR_VARIANT");
    w.softcap = 1e-39f;                                  /* subnormal: 1 / softcap past a float (NaN on the CPU) */
    t = p; t.scale = 0.0f;
    check(fa_forward_variants_cpu(&t, &w) == FA_ERR_VARIANT, "softcap 1e-39 -> FA_ERR_VARIANT");
    t = p; t.scale = 100.0f; w.softcap = 1e-37f;         /* scale / softcap past a float: NaN rows on CUDA */
    check(fa_forward_variants_cpu(&t, &w) == FA_ERR_VARIANT, "scale 100 / softcap 1e-37 -> FA_ERR_VARIANT");
    t = p; t.scale = 1e-10f; w.softcap = 1e37f;          /* scale / softcap subnormal: a few bits of the scale */
    check(fa_forward_variants_cpu(&t, &w) == FA_ERR_VARIANT, "scale 1e-10 / softcap 1e37 -> FA_ERR_VARIANT");
    t = p; t.Nq = INT64_MAX; check(fa_forward_cpu(&t) == FA_ERR_BAD_SIZE, "Nq INT64_MAX -> FA_ERR_BAD_SIZE");
    t = p; t.B = 3; t.q_batch_stride = (int64_t)1 << 62;
    check(fa_forward_cpu(&t) == FA_ERR_BAD_STRIDE, "offsets past int64 -> FA_ERR_BAD_STRIDE");
    /* Element offsets within int64 but byte offsets not: batch 1's output wrapped onto batch 0's. */
    t = p; t.B = 2; t.o_batch_stride = (int64_t)1 << 62;
    check(fa_check_params(&t) == FA_ERR_BAD_STRIDE, "o batch stride 2^62 -> FA_ERR_BAD_STRIDE");
    t = p; t.B = 2; t.o_batch_stride = INT64_MAX / 2;
    check(fa_forward_cpu(&t) == FA_ERR_BAD_STRIDE, "o batch stride INT64_MAX / 2 -> FA_ERR_BAD_STRIDE");
    /* The extras' strides: offsets past int64 once overflowed in the reads. */
    memset(&w, 0, sizeof w);
    float slopes[2] = {0.5f, 0.5f};
    uint8_t keys[2] = {1, 1};
    t = p; t.B = 2; t.o_batch_stride = t.q_batch_stride;
    w.alibi_slopes = slopes; w.alibi_batch_stride = INT64_MAX;
    check(fa_forward_variants_cpu(&t, &w) == FA_ERR_VARIANT, "ALiBi batch stride INT64_MAX -> FA_ERR_VARIANT");
    /* Slopes and sinks past ±FA_MAX_SCALE: × log2 e left a float (NaN rows); a sink of −inf is none. */
    memset(&w, 0, sizeof w);
    float big = 3e38f, sink = -INFINITY;
    w.alibi_slopes = &big;
    check(fa_forward_variants_cpu(&p, &w) == FA_ERR_VARIANT, "ALiBi slope 3e38 -> FA_ERR_VARIANT");
    w.alibi_slopes = NULL; w.sinks = &big;
    check(fa_forward_variants_cpu(&p, &w) == FA_ERR_VARIANT, "sink 3e38 -> FA_ERR_VARIANT");
    w.sinks = &sink;
    check(fa_forward_variants_cpu(&p, &w) == FA_OK && o[0] == 1.0f && o[3] == 4.0f, "sink -inf: no sink");
    memset(&w, 0, sizeof w);
    w.key_mask = keys; w.key_mask_batch_stride = INT64_MAX;
    check(fa_forward_variants_cpu(&t, &w) == FA_ERR_VARIANT, "key_mask batch stride INT64_MAX -> FA_ERR_VARIANT");
    memset(&w, 0, sizeof w);
    t = p; t.Nq = 2;
    w.mask = q; w.mask_kind = FA_MASK_ADD_F32; w.mask_row_stride = INT64_MAX / 2;
    check(fa_forward_variants_cpu(&t, &w) == FA_ERR_VARIANT, "mask row stride INT64_MAX / 2 -> FA_ERR_VARIANT");
    t = p; t.Hq = 2; t.Nq = 2; t.o_head_stride = d;          /* rows and heads on the same memory */
    check(fa_forward_cpu(&t) == FA_ERR_BAD_STRIDE, "o heads over o rows -> FA_ERR_BAD_STRIDE");
    int32_t cu[3] = {0, 1, 2};
    memset(&w, 0, sizeof w);
    w.cu_seqlens_q = w.cu_seqlens_k = cu; w.total_q = w.total_k = 2;
    t = p; t.o_row_stride = 0;                               /* two packed rows on one */
    check(fa_forward_variants_cpu(&t, &w) == FA_ERR_BAD_STRIDE, "packed o rows on one -> FA_ERR_BAD_STRIDE");
    /* max_seqlen far past the packed rows: the work sized by the longest sequence (2^40 looped for
     * minutes over empty query tiles). */
    t = p; t.B = 2; t.Nq = t.Nk = (int64_t)1 << 40; t.lse = NULL;
    t.q_batch_stride = t.k_batch_stride = t.v_batch_stride = t.o_batch_stride = 0;
    memset(o, 0, sizeof o);
    check(fa_forward_variants_cpu(&t, &w) == FA_OK && o[0] == 1.0f && o[d - 1] == 4.0f && o[d] == 1.0f
          && o[2 * d - 1] == 4.0f, "packed, max_seqlen 2^40: the answer at once");
    t = p; t.num_threads = 1000000;
    check(fa_forward_cpu(&t) == FA_OK, "num_threads 1e6: clamped");
    check(o[0] == 1.0f, "num_threads 1e6: the answer");

    /* Backward: Hq = 0 (once a division by zero), Nq = 0 (dK = dV = 0, k and v needed), overlapping dq. */
    fa_backward_params bp;
    memset(&bp, 0, sizeof bp);
    bp.p = p; bp.dout = q; bp.dq = dq; bp.dk = dk; bp.dv = dv;
    bp.do_row_stride = bp.dq_row_stride = bp.dk_row_stride = bp.dv_row_stride = d;
    bp.do_head_stride = bp.dq_head_stride = bp.dk_head_stride = bp.dv_head_stride = 2 * d;
    bp.do_batch_stride = bp.dq_batch_stride = bp.dk_batch_stride = bp.dv_batch_stride = 4 * d;
    fa_backward_params b2 = bp;
    dk[0] = 7.0f;
    b2.p.Hq = 0;
    check(fa_backward_cpu(&b2, NULL) == FA_OK && dk[0] == 0.0f, "backward Hq = 0: dK = 0");
    b2 = bp; b2.p.Nq = 0; b2.p.k = NULL;
    check(fa_backward_cpu(&b2, NULL) == FA_ERR_NULL_POINTER, "backward Nq = 0, k NULL -> FA_ERR_NULL_POINTER");
    b2 = bp; b2.p.Nq = 2; b2.dq_row_stride = 0;
    check(fa_backward_cpu(&b2, NULL) == FA_ERR_BAD_STRIDE, "backward dq rows on one -> FA_ERR_BAD_STRIDE");
    b2 = bp; b2.p.Hkv = 2; b2.p.Hq = 2; b2.dk_head_stride = 0;
    check(fa_backward_cpu(&b2, NULL) == FA_ERR_BAD_STRIDE, "backward dk heads on one -> FA_ERR_BAD_STRIDE");
    b2 = bp; b2.p.Nk = (int64_t)1 << 54; b2.p.k_row_stride = b2.p.v_row_stride = 0;
    b2.dk_row_stride = b2.dv_row_stride = 0;
    check(fa_backward_cpu(&b2, NULL) == FA_ERR_BAD_SIZE, "backward Nk 2^54 -> FA_ERR_BAD_SIZE");

    /* KV cache: Nnew past the cache (start + Nnew once overflowed), NULL caches to append into, B 2^61. */
    fa_kvcache_params kp;
    memset(&kp, 0, sizeof kp);
    kp.p = p; kp.p.Nk = 4; kp.k_new = q; kp.v_new = q; kp.Nnew = INT64_MAX;
    int32_t start[1] = {1};
    kp.cache_seqlens = start;
    const float k0 = k[0];
    check(fa_forward_kvcache_cpu(&kp) == FA_ERR_BAD_SIZE, "kvcache Nnew INT64_MAX -> FA_ERR_BAD_SIZE");
    kp.Nnew = 4;
    check(fa_forward_kvcache_cpu(&kp) == FA_ERR_SEQLEN, "kvcache 1 + 4 keys in 4 -> FA_ERR_SEQLEN");
    kp.Nnew = 1; kp.p.Nq = 0; kp.p.k = kp.p.v = NULL;
    check(fa_forward_kvcache_cpu(&kp) == FA_ERR_NULL_POINTER, "kvcache append into NULL -> FA_ERR_NULL_POINTER");
    memset(&kp, 0, sizeof kp);
    kp.p.d = 1; kp.p.B = (int64_t)1 << 61; kp.p.scale = 1.0f;
    check(fa_forward_kvcache_cpu(&kp) == FA_ERR_BAD_SIZE, "kvcache B 2^61 -> FA_ERR_BAD_SIZE");
    check(k[0] == k0, "rejected kvcache calls wrote nothing");
}

int main(void)
{
    /* Tile edges (63, 64, 65, 128, 129), one row or key, Nq far from Nk both ways, d that the
     * micro-kernel pads (1, 33, 100) and the largest d, Nk = 0. */
    const int64_t shapes[][6] = {
        {1, 1, 1, 1, 1, 1},     {1, 2, 1, 64, 64, 64},    {2, 3, 1, 65, 63, 33},
        {1, 2, 2, 129, 128, 100}, {1, 1, 1, 1, 300, 256}, {1, 2, 1, 300, 1, 256},
        {1, 4, 2, 200, 17, 128},  {1, 2, 1, 5, 0, 64},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        sweep_case(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], shapes[i][4], shapes[i][5]);

    /* q stored as (B, Nq, Hq, d) and seen as (B, Hq, Nq, d); k, v as (B, Hkv, Nk, d). */
    const int64_t B = 2, Hq = 4, Hkv = 2, Nq = 77, Nk = 130, d = 40;
    float *q = malloc(sizeof(float) * B * Nq * Hq * d);
    float *k = malloc(sizeof(float) * B * Hkv * Nk * d);
    float *v = malloc(sizeof(float) * B * Hkv * Nk * d);
    float *o = malloc(sizeof(float) * B * Hq * Nq * d);
    float *lse = malloc(sizeof(float) * B * Hq * Nq);
    for (int64_t i = 0; i < B * Nq * Hq * d; i++) q[i] = frand();
    for (int64_t i = 0; i < B * Hkv * Nk * d; i++) k[i] = frand(), v[i] = frand();

    fa_params p;
    memset(&p, 0, sizeof p);
    p.q = q; p.k = k; p.v = v; p.o = o; p.lse = lse;
    p.q_batch_stride = Nq * Hq * d; p.q_head_stride = d;          p.q_row_stride = Hq * d;
    p.k_batch_stride = Hkv * Nk * d; p.k_head_stride = Nk * d;    p.k_row_stride = d;
    p.v_batch_stride = Hkv * Nk * d; p.v_head_stride = Nk * d;    p.v_row_stride = d;
    p.o_batch_stride = Hq * Nq * d; p.o_head_stride = Nq * d;     p.o_row_stride = d;
    p.B = B; p.Hq = Hq; p.Hkv = Hkv; p.Nq = Nq; p.Nk = Nk; p.d = d;
    p.scale = 1.0f / sqrtf((float)d);
    p.dtype = FA_FLOAT32;

    char what[128];
    for (int causal = 0; causal <= 1; causal++) {
        p.causal = causal;
        for (int64_t i = 0; i < B * Hq * Nq * d; i++) o[i] = NAN;   /* poison */
        const int st = fa_forward_cpu(&p);
        const double err = max_error(&p);
        snprintf(what, sizeof what, "fa_forward_cpu causal=%d: status %d, max error %.2e", causal, st, err);
        check(st == FA_OK && err < 1e-5, what);
    }

    /* Bad parameters: a status, nothing written. */
    fa_params bad = p;
    o[0] = 12345.0f;
    bad.d = 0;              check(fa_forward_cpu(&bad) == FA_ERR_HEAD_DIM, "d = 0 -> FA_ERR_HEAD_DIM");
    bad = p; bad.d = 300;   check(fa_forward_cpu(&bad) == FA_ERR_HEAD_DIM, "d = 300 -> FA_ERR_HEAD_DIM");
    bad = p; bad.Hkv = 3;   check(fa_forward_cpu(&bad) == FA_ERR_GQA, "Hq = 4, Hkv = 3 -> FA_ERR_GQA");
    bad = p; bad.Nk = -1;   check(fa_forward_cpu(&bad) == FA_ERR_BAD_SIZE, "Nk = -1 -> FA_ERR_BAD_SIZE");
    bad = p; bad.k = NULL;  check(fa_forward_cpu(&bad) == FA_ERR_NULL_POINTER, "k = NULL -> FA_ERR_NULL_POINTER");
    bad = p; bad.q_row_stride = -1;
    check(fa_forward_cpu(&bad) == FA_ERR_BAD_STRIDE, "negative stride -> FA_ERR_BAD_STRIDE");
    bad = p; bad.o_row_stride = 0;
    check(fa_forward_cpu(&bad) == FA_ERR_BAD_STRIDE, "output row stride 0 -> FA_ERR_BAD_STRIDE");
    bad = p; bad.o_head_stride = d - 1;
    check(fa_forward_cpu(&bad) == FA_ERR_BAD_STRIDE, "overlapping output heads -> FA_ERR_BAD_STRIDE");
    bad = p; bad.k_head_stride = 0; bad.k_row_stride = 0;   /* repeated input rows are fine */
    check(fa_check_params(&bad) == FA_OK, "input strides 0 (expanded) -> FA_OK");
    bad = p; bad.scale = NAN; check(fa_forward_cpu(&bad) == FA_ERR_SCALE, "scale = NaN -> FA_ERR_SCALE");
    bad = p; bad.dtype = (fa_dtype)7; check(fa_forward_cpu(&bad) == FA_ERR_DTYPE, "dtype 7 -> FA_ERR_DTYPE");
    check(fa_forward_cpu(NULL) == FA_ERR_NULL_POINTER, "params = NULL -> FA_ERR_NULL_POINTER");
    check(o[0] == 12345.0f, "rejected calls wrote nothing");
    check(strcmp(fa_strerror(FA_ERR_GQA), "Hkv must be >= 1 and divide Hq") == 0, "fa_strerror");
    check(fa_strerror(-1) != NULL && fa_strerror(FA_NUM_STATUS) != NULL, "fa_strerror of unknown codes");

    /* Empty problem: OK with NULL data. */
    fa_params empty;
    memset(&empty, 0, sizeof empty);
    empty.d = 64; empty.Hq = empty.Hkv = 1; empty.scale = 1.0f;
    check(fa_forward_cpu(&empty) == FA_OK, "B = 0 with NULL pointers -> FA_OK");

    free(q); free(k); free(v); free(o); free(lse);
    kvcache_case();
    backward_case();
    window_backward_case();
    hostile_case();
    return failures != 0;
}
