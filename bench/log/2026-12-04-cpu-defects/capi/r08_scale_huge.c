/* fa_forward_cpu with scale = 3e38 (finite: accepted). scale * log2(e) overflows fp32 to +inf, so
 * Q * scale_log2 has inf and 0 * inf = NaN entries: output NaN with FA_OK. The scores themselves
 * (3e38 and 0) are finite fp32: the softmax is one-hot on key 0, expected o = v[0] = 1 2 3 4
 * (what an fp32 softmax(QK^T*scale)V gives). Edge case; same root cause as r07 (softcap). */
#include "common.h"
int main(void)
{
    float q[4] = {1, 0, 0, 0}, k[8] = {1, 0, 0, 0, 0, 1, 0, 0}, v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, o[4], lse[1];
    fa_params p;
    setp(&p, 1, 1, 1, 1, 2, 4, q, k, v, o, lse);
    p.scale = 3e38f;
    int st = fa_forward_cpu(&p);
    printf("scale 3e38: status %d  o = %g %g %g %g  lse = %g  (expected 1 2 3 4, lse 3e38)\n", st, o[0], o[1], o[2], o[3], lse[0]);
    p.scale = 2e38f;
    st = fa_forward_cpu(&p);
    printf("scale 2e38: status %d  o = %g %g %g %g  lse = %g\n", st, o[0], o[1], o[2], o[3], lse[0]);
    return 0;
}
