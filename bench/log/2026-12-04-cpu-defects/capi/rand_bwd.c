/* Random backward calls (fp32, dense, GQA, causal/align/window/softcap/alibi/sinks/key_mask, dlse)
 * against gradients computed in double from the formulas. */
#include "common.h"
static double urand(void) { return rand() / (double)RAND_MAX; }
static int irand(int n) { return rand() % n; }
int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 100; srand(argc > 2 ? atoi(argv[2]) : 1);
    int bad = 0; double worst = 0;
    for (int it = 0; it < iters; it++) {
        int64_t B = 1 + irand(2), Hkv = 1 + irand(2), G = 1 + irand(3), Hq = Hkv * G;
        int64_t ds[] = {1, 4, 16, 33, 64, 128}; int64_t d = ds[irand(6)];
        int64_t Nq = 1 + irand(90), Nk = irand(6) == 0 ? 0 : 1 + irand(100);
        int64_t nqe = B * Hq * Nq * d, nke = B * Hkv * Nk * d;
        float *q = malloc(4 * (nqe + 1)), *k = malloc(4 * (nke + 1)), *v = malloc(4 * (nke + 1)), *o = malloc(4 * (nqe + 1));
        float *lse = malloc(4 * (B * Hq * Nq + 1)), *dout = malloc(4 * (nqe + 1)), *dlse = malloc(4 * (B * Hq * Nq + 1));
        float *dq = malloc(4 * (nqe + 1)), *dk = malloc(4 * (nke + 1)), *dv = malloc(4 * (nke + 1));
        for (int64_t x = 0; x < nqe; x++) q[x] = (float)(urand() * 2 - 1), dout[x] = (float)(urand() * 2 - 1);
        for (int64_t x = 0; x < nke; x++) k[x] = (float)(urand() * 2 - 1), v[x] = (float)(urand() * 2 - 1);
        for (int64_t x = 0; x < B * Hq * Nq; x++) dlse[x] = (float)(urand() * 2 - 1);
        fa_backward_params bp; memset(&bp, 0, sizeof bp);
        setp(&bp.p, B, Hq, Hkv, Nq, Nk, d, q, k, v, o, lse);
        bp.p.causal = irand(2); bp.p.num_threads = irand(3); bp.p.scale = (float)(urand() * 2 / sqrt((double)d));
        fa_variants va; memset(&va, 0, sizeof va);
        float slopes[8], sinks[8], dsinks[8]; uint8_t km[256];
        va.align = irand(2);
        if (irand(3) == 0) { va.window = 1; va.window_left = irand(3) ? irand(30) : -1; va.window_right = irand(3) ? irand(30) : -1; }
        if (irand(3) == 0) va.softcap = (float)(0.3 + urand() * 3);
        if (irand(3) == 0) { for (int x = 0; x < 8; x++) slopes[x] = (float)(urand() * 0.2); va.alibi_slopes = slopes; }
        if (irand(3) == 0) { for (int x = 0; x < 8; x++) sinks[x] = (float)(urand() * 2 - 1), dsinks[x] = 99; va.sinks = sinks; bp.dsinks = dsinks; }
        if (irand(3) == 0) { for (int x = 0; x < 256; x++) km[x] = irand(4) != 0; va.key_mask = km; va.key_mask_batch_stride = 128; }
        int use_dlse = irand(2);
        if (fa_forward_variants_cpu(&bp.p, &va) != FA_OK) { printf("fwd fail\n"); return 1; }
        bp.dout = dout; bp.dlse = use_dlse ? dlse : NULL; bp.dq = dq; bp.dk = dk; bp.dv = dv;
        bp.do_row_stride = bp.dq_row_stride = d; bp.do_head_stride = bp.dq_head_stride = Nq * d; bp.do_batch_stride = bp.dq_batch_stride = Hq * Nq * d;
        bp.dk_row_stride = bp.dv_row_stride = d; bp.dk_head_stride = bp.dv_head_stride = Nk * d; bp.dk_batch_stride = bp.dv_batch_stride = Hkv * Nk * d;
        int st = fa_backward_cpu(&bp, &va);
        if (st != FA_OK) { printf("it %d bwd status %d\n", it, st); bad++; continue; }
        double *rdq = calloc(nqe + 1, 8), *rdk = calloc(nke + 1, 8), *rdv = calloc(nke + 1, 8), rds[8] = {0};
        double *s = malloc(8 * (Nk + 1)), *P = malloc(8 * (Nk + 1)), *dP = malloc(8 * (Nk + 1)), *tt = malloc(8 * (Nk + 1)); int *vis = malloc(sizeof(int) * (Nk + 1));
        double scale = bp.p.scale;
        for (int64_t b = 0; b < B; b++) for (int64_t h = 0; h < Hq; h++) for (int64_t i = 0; i < Nq; i++) {
            int64_t hk = h / G, delta = va.align ? Nk - Nq : 0;
            const float *qi = q + ((b * Hq + h) * Nq + i) * d, *gi = dout + ((b * Hq + h) * Nq + i) * d;
            const float *kb = k + (b * Hkv + hk) * Nk * d, *vb = v + (b * Hkv + hk) * Nk * d;
            double m = va.sinks ? sinks[h] : -INFINITY;
            for (int64_t j = 0; j < Nk; j++) {
                int ok = 1;
                if (bp.p.causal && j > i + delta) ok = 0;
                if (va.window) { if (va.window_left >= 0 && j < i + delta - va.window_left) ok = 0;
                                 if (!bp.p.causal && va.window_right >= 0 && j > i + delta + va.window_right) ok = 0; }
                if (va.key_mask && !km[b * 128 + j]) ok = 0;
                double x = 0; for (int64_t c = 0; c < d; c++) x += (double)qi[c] * kb[j * d + c];
                x *= scale; tt[j] = 0;
                if (va.softcap > 0) { tt[j] = tanh(x / va.softcap); x = va.softcap * tt[j]; }
                if (va.alibi_slopes) x -= slopes[h] * fabs((double)(i + delta - j));
                vis[j] = ok; s[j] = x; if (ok && x > m) m = x;
            }
            if (m == -INFINITY) continue;
            double l = va.sinks ? exp(sinks[h] - m) : 0;
            for (int64_t j = 0; j < Nk; j++) l += vis[j] ? exp(s[j] - m) : 0;
            double Dsum = 0;
            for (int64_t j = 0; j < Nk; j++) {
                P[j] = vis[j] ? exp(s[j] - m) / l : 0;
                double x = 0; for (int64_t c = 0; c < d; c++) x += (double)gi[c] * vb[j * d + c];
                dP[j] = x; Dsum += P[j] * dP[j];
            }
            double dl = use_dlse ? dlse[(b * Hq + h) * Nq + i] : 0;
            /* loss = sum O.dO + sum lse.dlse: dS_j = P_j (dP_j - D + dlse) */
            double Dd = Dsum - dl;
            if (va.sinks) rds[h] += -exp(sinks[h] - m) / l * Dd;
            for (int64_t j = 0; j < Nk; j++) {
                if (!vis[j]) continue;
                double dsj = P[j] * (dP[j] - Dd) * scale;
                if (va.softcap > 0) dsj *= 1 - tt[j] * tt[j];
                for (int64_t c = 0; c < d; c++) {
                    rdq[((b * Hq + h) * Nq + i) * d + c] += dsj * kb[j * d + c];
                    rdk[((b * Hkv + hk) * Nk + j) * d + c] += dsj * qi[c];
                    rdv[((b * Hkv + hk) * Nk + j) * d + c] += P[j] * gi[c];
                }
            }
        }
        double err = 0, e;
        for (int64_t x = 0; x < nqe; x++) { e = fabs(rdq[x] - dq[x]); if (!(e <= err)) err = e; }
        for (int64_t x = 0; x < nke; x++) { e = fabs(rdk[x] - dk[x]); if (!(e <= err)) err = e; e = fabs(rdv[x] - dv[x]); if (!(e <= err)) err = e; }
        if (va.sinks) for (int h = 0; h < Hq; h++) { e = fabs(rds[h] - dsinks[h]); if (!(e <= err)) err = e; }
        if (!(err < 2e-3)) { bad++; printf("it %d err %.3g B%ld Hq%ld Hkv%ld Nq%ld Nk%ld d%ld causal %d align %d win %d(%ld,%ld) cap %g alibi %d sinks %d km %d dlse %d\n", it, err,
            (long)B, (long)Hq, (long)Hkv, (long)Nq, (long)Nk, (long)d, bp.p.causal, va.align, va.window, (long)va.window_left, (long)va.window_right, va.softcap, va.alibi_slopes != NULL, va.sinks != NULL, va.key_mask != NULL, use_dlse); }
        if (err > worst || err != err) worst = err;
        free(q); free(k); free(v); free(o); free(lse); free(dout); free(dlse); free(dq); free(dk); free(dv);
        free(rdq); free(rdk); free(rdv); free(s); free(P); free(dP); free(tt); free(vis);
    }
    printf("%d iterations, %d bad, worst %.3g\n", iters, bad, worst);
    return 0;
}
