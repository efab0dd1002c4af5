/* Random valid forward calls (fp32, variants, GQA, strided/interleaved layouts, varlen, kvcache)
 * against a naive double reference. Prints the worst cases. */
#include "common.h"
static double urand(void) { return rand() / (double)RAND_MAX; }
static int irand(int n) { return rand() % n; }
typedef struct { int64_t B, Hq, Hkv, Nq, Nk, d; } shp;
/* reference: o_ref (B,Hq,Nq,d) dense, lse_ref */
static void ref_row(const fa_params *p, const fa_variants *v, int64_t b, int64_t h, int64_t i, int64_t nq, int64_t nk,
                    const float *qrow, const float *kbase, const float *vbase, int64_t ksr, int64_t vsr, int64_t delta,
                    double *out, double *lse_out)
{
    int64_t d = p->d, G = p->Hq / p->Hkv; (void)G;
    double *s = malloc(sizeof(double) * (nk + 1)); int *vis = malloc(sizeof(int) * (nk + 1));
    double m = -INFINITY;
    for (int64_t j = 0; j < nk; j++) {
        int ok = 1;
        if (p->causal && j > i + delta) ok = 0;
        if (v && v->window) {
            if (v->window_left >= 0 && j < i + delta - v->window_left) ok = 0;
            if (!p->causal && v->window_right >= 0 && j > i + delta + v->window_right) ok = 0;
        }
        if (v && v->key_mask && !v->key_mask[b * v->key_mask_batch_stride + j]) ok = 0;
        double x = 0;
        for (int64_t c = 0; c < d; c++) x += (double)qrow[c] * kbase[j * ksr + c];
        x *= p->scale;
        if (v && v->softcap > 0) x = v->softcap * tanh(x / v->softcap);
        if (v && v->alibi_slopes) x -= v->alibi_slopes[b * v->alibi_batch_stride + h] * fabs((double)(i + delta - j));
        if (v && v->mask) {
            int64_t at = b * v->mask_batch_stride + h * v->mask_head_stride + i * v->mask_row_stride + j * v->mask_col_stride;
            if (v->mask_kind == FA_MASK_BOOL) { if (!((const uint8_t *)v->mask)[at]) ok = 0; }
            else x += ((const float *)v->mask)[at];
        }
        vis[j] = ok; s[j] = x;
        if (ok && x > m) m = x;
    }
    double sink = (v && v->sinks) ? v->sinks[h] : -INFINITY;
    if (sink > m) m = sink;
    double l = 0;
    for (int c = 0; c < d; c++) out[c] = 0;
    if (m == -INFINITY) { *lse_out = -INFINITY; free(s); free(vis); return; }
    for (int64_t j = 0; j < nk; j++) if (vis[j]) { double e = exp(s[j] - m); l += e; for (int64_t c = 0; c < d; c++) out[c] += e * vbase[j * vsr + c]; }
    if (v && v->sinks) l += exp(sink - m);
    for (int64_t c = 0; c < d; c++) out[c] /= l;
    *lse_out = m + log(l);
    free(s); free(vis);
}
int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 300;
    srand(argc > 2 ? atoi(argv[2]) : 1);
    double worst = 0; int bad = 0;
    for (int it = 0; it < iters; it++) {
        int mode = irand(3);                 /* 0 dense, 1 varlen, 2 kvcache */
        int64_t B = 1 + irand(3), Hkv = 1 + irand(2), G = 1 + irand(4), Hq = Hkv * G;
        int64_t ds[] = {1, 3, 8, 16, 17, 32, 64, 65, 128, 256};
        int64_t d = ds[irand(10)];
        int64_t Nq = irand(4) == 0 ? 1 + irand(4) : 1 + irand(150), Nk = irand(5) == 0 ? irand(3) : irand(200);
        if (mode == 2 && Nk < 1) Nk = 1;
        int layout = irand(2);   /* 0 BHND, 1 BNHD */
        int64_t total_q = B * Nq, total_k = B * Nk;
        float *q = malloc(sizeof(float) * (total_q * Hq * d + 1)), *k = malloc(sizeof(float) * (total_k * Hkv * d + 1));
        float *vv = malloc(sizeof(float) * (total_k * Hkv * d + 1)), *o = malloc(sizeof(float) * (total_q * Hq * d + 1));
        float *lse = malloc(sizeof(float) * (total_q * Hq + 1));
        for (int64_t x = 0; x < total_q * Hq * d; x++) q[x] = (float)(urand() * 2 - 1), o[x] = NAN;
        for (int64_t x = 0; x < total_k * Hkv * d; x++) k[x] = (float)(urand() * 2 - 1), vv[x] = (float)(urand() * 2 - 1);
        fa_params p; memset(&p, 0, sizeof p);
        p.q = q; p.k = k; p.v = vv; p.o = o; p.lse = lse; p.B = B; p.Hq = Hq; p.Hkv = Hkv; p.Nq = Nq; p.Nk = Nk; p.d = d;
        p.scale = (float)(urand() * 2 / sqrt((double)d)); p.causal = irand(3) == 0 ? 0 : irand(3); p.dtype = FA_FLOAT32;
        p.num_threads = irand(3);
        if (layout == 0) {
            p.q_row_stride = p.o_row_stride = d; p.q_head_stride = p.o_head_stride = Nq * d; p.q_batch_stride = p.o_batch_stride = Hq * Nq * d;
            p.k_row_stride = p.v_row_stride = d; p.k_head_stride = p.v_head_stride = Nk * d; p.k_batch_stride = p.v_batch_stride = Hkv * Nk * d;
        } else {
            p.q_row_stride = p.o_row_stride = Hq * d; p.q_head_stride = p.o_head_stride = d; p.q_batch_stride = p.o_batch_stride = Hq * Nq * d;
            p.k_row_stride = p.v_row_stride = Hkv * d; p.k_head_stride = p.v_head_stride = d; p.k_batch_stride = p.v_batch_stride = Hkv * Nk * d;
        }
        fa_variants va; memset(&va, 0, sizeof va);
        float slopes[64], sinks[16]; uint8_t *km = NULL; float *mask = NULL; uint8_t *bmask = NULL;
        int32_t cuq[5], cuk[5]; int32_t sl[4];
        if (irand(2)) va.align = irand(2);
        if (irand(3) == 0) { va.window = 1; va.window_left = irand(3) ? irand(40) : -1; va.window_right = irand(3) ? irand(40) : -1; }
        if (irand(4) == 0) va.softcap = (float)(0.5 + urand() * 20);
        if (irand(4) == 0) { for (int x = 0; x < 64; x++) slopes[x] = (float)(urand() * 0.3); va.alibi_slopes = slopes; va.alibi_batch_stride = irand(2) ? Hq : 0; }
        if (irand(4) == 0) { for (int x = 0; x < 16; x++) sinks[x] = (float)(urand() * 4 - 2); va.sinks = sinks; }
        if (mode == 0 && irand(4) == 0) { km = malloc(B * (Nk + 1)); for (int64_t x = 0; x < B * (Nk + 1); x++) km[x] = irand(4) != 0; va.key_mask = km; va.key_mask_batch_stride = Nk + 1; }
        if (mode == 0 && irand(4) == 0) {
            int64_t n = B * Hq * Nq * Nk + 1;
            if (irand(2)) { mask = malloc(sizeof(float) * n); for (int64_t x = 0; x < n; x++) mask[x] = (float)(urand() * 4 - 2); va.mask = mask; va.mask_kind = FA_MASK_ADD_F32; }
            else { bmask = malloc(n); for (int64_t x = 0; x < n; x++) bmask[x] = irand(5) != 0; va.mask = bmask; va.mask_kind = FA_MASK_BOOL; }
            va.mask_batch_stride = irand(2) ? Hq * Nq * Nk : 0; va.mask_head_stride = irand(2) ? Nq * Nk : 0; va.mask_row_stride = Nk; va.mask_col_stride = 1;
        }
        int st;
        if (mode == 1) {
            /* packed: BNHD-like rows; sequences of random length <= Nq / Nk */
            cuq[0] = cuk[0] = 0;
            for (int b = 0; b < B; b++) { cuq[b + 1] = cuq[b] + (b == 0 ? Nq : irand(Nq + 1)); cuk[b + 1] = cuk[b] + (b == 0 ? Nk : irand(Nk + 1)); }
            va.cu_seqlens_q = cuq; va.cu_seqlens_k = cuk; va.total_q = total_q; va.total_k = total_k;
            p.q_row_stride = p.o_row_stride = Hq * d; p.q_head_stride = p.o_head_stride = d;
            p.k_row_stride = p.v_row_stride = Hkv * d; p.k_head_stride = p.v_head_stride = d;
            p.q_batch_stride = p.o_batch_stride = p.k_batch_stride = p.v_batch_stride = 0;
            st = fa_forward_variants_cpu(&p, &va);
        } else if (mode == 2) {
            fa_kvcache_params kp; memset(&kp, 0, sizeof kp); kp.p = p;
            for (int b = 0; b < B; b++) sl[b] = irand(Nk + 1);
            kp.cache_seqlens = irand(4) ? sl : NULL;
            if (kp.cache_seqlens == NULL) for (int b = 0; b < B; b++) sl[b] = Nk;
            va.align = FA_ALIGN_BOTTOM_RIGHT;
            st = fa_forward_kvcache_variants_cpu(&kp, &va);
        } else
            st = fa_forward_variants_cpu(&p, &va);
        if (st != FA_OK) { printf("it %d: status %d (%s) mode %d\n", it, st, fa_strerror(st), mode); bad++; goto next; }
        double err = 0; double *out = malloc(sizeof(double) * d);
        for (int64_t b = 0; b < B; b++) for (int64_t h = 0; h < Hq; h++) {
            int64_t hk = h / G, nq, nk, q0 = 0, k0 = 0;
            const float *qb, *kb, *vb; float *ob; float *lb;
            if (mode == 1) { q0 = cuq[b]; k0 = cuk[b]; nq = cuq[b + 1] - q0; nk = cuk[b + 1] - k0;
                qb = q + q0 * p.q_row_stride + h * p.q_head_stride; ob = o + q0 * p.o_row_stride + h * p.o_head_stride;
                kb = k + k0 * p.k_row_stride + hk * p.k_head_stride; vb = vv + k0 * p.v_row_stride + hk * p.v_head_stride; lb = lse + h * total_q + q0; }
            else { nq = Nq; nk = mode == 2 ? sl[b] : Nk;
                qb = q + b * p.q_batch_stride + h * p.q_head_stride; ob = o + b * p.o_batch_stride + h * p.o_head_stride;
                kb = k + b * p.k_batch_stride + hk * p.k_head_stride; vb = vv + b * p.v_batch_stride + hk * p.v_head_stride; lb = lse + (b * Hq + h) * Nq; }
            int64_t delta = va.align == FA_ALIGN_BOTTOM_RIGHT ? nk - nq : 0;
            for (int64_t i = 0; i < nq; i++) {
                double l;
                ref_row(&p, &va, b, h, i, nq, nk, qb + i * p.q_row_stride, kb, vb, p.k_row_stride, p.v_row_stride, delta, out, &l);
                for (int64_t c = 0; c < d; c++) { double e = fabs(out[c] - ob[i * p.o_row_stride + c]); if (!(e <= err)) err = e; }
                double el = (l == -INFINITY && lb[i] == -INFINITY) ? 0 : fabs(l - lb[i]);
                if (!(el <= err)) err = el;
            }
        }
        free(out);
        if (!(err < 1e-4)) { bad++; printf("it %d: err %.3g mode %d B%ld Hq%ld Hkv%ld Nq%ld Nk%ld d%ld causal %d align %d win %d(%ld,%ld) softcap %g alibi %d sinks %d km %d mask %d layout %d\n",
            it, err, mode, (long)B, (long)Hq, (long)Hkv, (long)Nq, (long)Nk, (long)d, p.causal, va.align, va.window, (long)va.window_left, (long)va.window_right, va.softcap, va.alibi_slopes != NULL, va.sinks != NULL, km != NULL, va.mask_kind, layout); }
        if (err > worst || err != err) worst = err;
    next:
        free(q); free(k); free(vv); free(o); free(lse); free(km); free(mask); free(bmask);
    }
    printf("%d iterations, %d bad, worst %.3g\n", iters, bad, worst);
    return 0;
}
