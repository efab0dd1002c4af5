/* fa_forward_variants_cpu with softcap = 3e38 (finite and > 0: accepted). The kernel multiplies
 * softcap by log2(e) in fp32, which overflows to +inf; c2 * tanh(s / c2) = inf * 0 = NaN, so the
 * whole output is NaN with FA_OK. Expected ~ plain attention (a cap of 3e38 changes nothing). */
#include "common.h"
int main(void)
{
    float q[4] = {1, 0, 0, 0}, k[8] = {1, 0, 0, 0, 0, 1, 0, 0}, v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, o[4], lse[1];
    fa_params p;
    fa_variants var;
    setp(&p, 1, 1, 1, 1, 2, 4, q, k, v, o, lse);
    memset(&var, 0, sizeof var);
    var.softcap = 3e38f;
    int st = fa_forward_variants_cpu(&p, &var);
    printf("softcap 3e38: status %d  o = %g %g %g %g  lse = %g\n", st, o[0], o[1], o[2], o[3], lse[0]);
    var.softcap = 0.0f;
    st = fa_forward_variants_cpu(&p, &var);
    printf("no softcap  : status %d  o = %g %g %g %g  lse = %g\n", st, o[0], o[1], o[2], o[3], lse[0]);
    return 0;
}
