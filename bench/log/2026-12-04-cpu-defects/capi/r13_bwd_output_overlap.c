/* fa_backward_cpu accepts dq/dk/dv strides that make output rows overlap (dq_row_stride = 0 with
 * Nq = 2, dk_head_stride = 0 with Hkv = 2 ...), returning FA_OK; the forward rejects the same
 * layout of o with FA_ERR_BAD_STRIDE. With Hkv = 2 and 2 threads, two threads write the same dk
 * rows (a data race). Expected: FA_ERR_BAD_STRIDE as in the forward. */
#include "common.h"
int main(void)
{
    float q[16], k[16], v[16], o[16], lse[4], dout[16], dq[16], dk[16], dv[16];
    for (int i = 0; i < 16; i++) q[i] = (float)(i % 5) * 0.3f, k[i] = (float)(i % 3) * 0.2f, v[i] = (float)i, dout[i] = 1.0f;
    fa_backward_params bp;
    memset(&bp, 0, sizeof bp);
    setp(&bp.p, 1, 2, 2, 2, 2, 4, q, k, v, o, lse);
    if (fa_forward_cpu(&bp.p) != FA_OK) return 1;
    bp.dout = dout; bp.dq = dq; bp.dk = dk; bp.dv = dv;
    bp.do_row_stride = bp.dq_row_stride = bp.dk_row_stride = bp.dv_row_stride = 4;
    bp.do_head_stride = bp.dq_head_stride = bp.dk_head_stride = bp.dv_head_stride = 8;
    bp.dq_row_stride = 0;      /* both query rows of a head write dq row 0 */
    bp.dk_head_stride = 0;     /* both kv heads write the same dk rows */
    int st = fa_backward_cpu(&bp, NULL);
    printf("backward with overlapping dq/dk: status %d (%s), expected %d (FA_ERR_BAD_STRIDE)\n", st, fa_strerror(st), FA_ERR_BAD_STRIDE);
    fa_params p = bp.p;
    p.o_row_stride = 0;
    printf("forward with o_row_stride = 0: status %d\n", fa_forward_cpu(&p));
    return 0;
}
