/* fa_forward_kvcache_cpu with Hq = 0 (no query heads) and one new key: the caches p.k, p.v are NULL,
 * which check_params accepts because there is no output; the append then memcpy()s into NULL. */
#include "common.h"
int main(void)
{
    float kn[4] = {1, 2, 3, 4}, vn[4] = {1, 2, 3, 4};
    fa_kvcache_params kp;
    memset(&kp, 0, sizeof kp);
    setp(&kp.p, 1, 0, 1, 3, 8, 4, NULL, NULL, NULL, NULL, NULL);   /* Nq = 0, Nmax = 8, caches NULL */
    kp.k_new = kn; kp.v_new = vn; kp.Nnew = 1;
    kp.kn_row_stride = kp.vn_row_stride = 4;
    int st = fa_forward_kvcache_cpu(&kp);
    printf("status %d (%s)\n", st, fa_strerror(st));
    return 0;
}
