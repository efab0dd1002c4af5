/* fa_backward_cpu with Nq = 0, Nk = 4: q, k, v, o, lse are NULL (check_params only requires them
 * when Nq > 0), dk and dv given. The backward then loads K and V rows from NULL. */
#include "common.h"
int main(void)
{
    float dk[16], dv[16];
    fa_backward_params bp;
    memset(&bp, 0, sizeof bp);
    setp(&bp.p, 1, 1, 1, 0, 4, 4, NULL, NULL, NULL, NULL, NULL);
    bp.dk = dk; bp.dv = dv;
    bp.dk_row_stride = bp.dv_row_stride = 4; bp.dk_head_stride = bp.dv_head_stride = 16;
    int st = fa_backward_cpu(&bp, NULL);
    printf("status %d (%s)\n", st, fa_strerror(st));
    return 0;
}
