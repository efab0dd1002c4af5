/* Output strides that make rows of o overlap, accepted with FA_OK although fa.h promises
 * FA_ERR_BAD_STRIDE for "o strides that make output rows overlap" (check_params only compares
 * each stride with d on its own).
 * (a) Hq = 2, Nq = 2, o_row_stride = d, o_head_stride = d: head 1 row 0 is head 0 row 1.
 * (b) varlen: B = 2 sequences of 1 query each (max_seqlen Nq = 1), o_row_stride = 0: the check
 *     looks at Nq (= max_seqlen) > 1, not at total_q, so both sequences write one row. */
#include "common.h"
int main(void)
{
    float q[16], k[16], v[16], o[64];
    for (int i = 0; i < 16; i++) q[i] = k[i] = (float)(i % 3), v[i] = (float)i;
    fa_params p;
    setp(&p, 1, 2, 2, 2, 2, 4, q, k, v, o, NULL);
    p.o_row_stride = 4; p.o_head_stride = 4;
    int st = fa_forward_cpu(&p);
    printf("(a) overlapping head/row strides: status %d (%s)  expected %d (FA_ERR_BAD_STRIDE)\n", st, fa_strerror(st), FA_ERR_BAD_STRIDE);

    const int32_t cu[3] = {0, 1, 2};
    fa_variants var;
    memset(&var, 0, sizeof var);
    var.cu_seqlens_q = cu; var.cu_seqlens_k = cu; var.total_q = 2; var.total_k = 2;
    setp(&p, 2, 1, 1, 1, 1, 4, q, k, v, o, NULL);     /* packed: rows along the row stride */
    p.q_row_stride = p.k_row_stride = p.v_row_stride = 4;
    p.o_row_stride = 0;
    st = fa_forward_variants_cpu(&p, &var);
    printf("(b) varlen, o_row_stride = 0 with 2 packed rows: status %d (%s)  expected %d; o[0..3] = %g %g %g %g "
           "(seq 0 should be %g.., seq 1 %g..)\n", st, fa_strerror(st), FA_ERR_BAD_STRIDE, o[0], o[1], o[2], o[3], v[0], v[4]);
    return 0;
}
