/* fa_forward_cpu with Nq = INT64_MAX (d = 1, every stride valid): run_blocks computes
 * n_qblocks = (Nq + BM - 1) / BM, a signed overflow (UB; UBSan aborts). Unsanitized it wraps
 * negative, the parallel region is given num_threads(negative) and the call "succeeds" having
 * written nothing. Expected: FA_ERR_BAD_SIZE (sizes whose products/offsets overflow int64),
 * not UB. The output buffer is tiny on purpose: nothing should be touched either way. */
#include "common.h"
int main(void)
{
    float q[1] = {1}, k[1] = {1}, v[1] = {2}, o[1] = {-7};
    fa_params p;
    setp(&p, 1, 1, 1, INT64_MAX, 1, 1, q, k, v, o, NULL);
    p.q_row_stride = 0;
    int st = fa_forward_cpu(&p);
    printf("status %d (%s), o[0] = %g\n", st, fa_strerror(st), o[0]);
    return 0;
}
