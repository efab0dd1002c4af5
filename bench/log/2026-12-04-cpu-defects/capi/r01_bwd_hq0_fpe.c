/* fa_backward_cpu with Hq = 0, Hkv = 1 (passes every check): division by zero in seq_of. */
#include "common.h"
int main(void)
{
    float q[4] = {0}, k[4] = {0}, v[4] = {0}, o[4] = {0}, lse[4] = {0}, dout[4] = {0}, dq[4], dk[4], dv[4];
    fa_backward_params bp;
    memset(&bp, 0, sizeof bp);
    setp(&bp.p, 1, 0, 1, 1, 1, 1, q, k, v, o, lse);
    bp.dout = dout; bp.dq = dq; bp.dk = dk; bp.dv = dv;
    bp.do_row_stride = bp.dq_row_stride = bp.dk_row_stride = bp.dv_row_stride = 1;
    int st = fa_backward_cpu(&bp, NULL);
    printf("status %d (%s)\n", st, fa_strerror(st));
    return 0;
}
