/* fa_forward_kvcache_cpu with cache_seqlens[0] = 1 and Nnew = INT64_MAX (k_new, v_new with zero
 * strides: one row repeated). start + Nnew overflows int64, wraps negative and passes the
 * "start + Nnew > Nmax" check; the append then writes far outside the cache. Expected
 * FA_ERR_SEQLEN with nothing written. */
#include "common.h"
int main(void)
{
    float q[4] = {1, 1, 1, 1}, o[4] = {7, 7, 7, 7}, kc[32] = {0}, vc[32] = {0}, kn[4] = {1, 2, 3, 4}, vn[4] = {1, 2, 3, 4};
    const int32_t seqlens[1] = {1};
    fa_kvcache_params kp;
    memset(&kp, 0, sizeof kp);
    setp(&kp.p, 1, 1, 1, 1, 8, 4, q, kc, vc, o, NULL);   /* Nmax = 8 */
    kp.cache_seqlens = seqlens;
    kp.k_new = kn; kp.v_new = vn; kp.Nnew = INT64_MAX;    /* strides 0: valid "repeated row" input */
    int st = fa_forward_kvcache_cpu(&kp);
    printf("status %d (%s)\n", st, fa_strerror(st));
    return 0;
}
