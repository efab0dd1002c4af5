/* fa_backward_cpu with Nk = 14411518807585600 keys given as one repeated row (k, v, dk, dv row
 * strides 0; none of these strides is checked against overlap in the backward), d = 32. The
 * per-thread scratch size 4 * (320 * kr + 10304) bytes (kr = Nk + 8) wraps modulo 2^64 to
 * 67840 bytes; backward_kv_head then zeroes / fills kr rows of it: heap overflow. Expected
 * FA_ERR_OUT_OF_MEMORY (or FA_ERR_BAD_SIZE / FA_ERR_BAD_STRIDE), never a write past the block. */
#include "common.h"
int main(void)
{
    float q[32] = {1}, k[32] = {1}, v[32] = {1}, o[32], lse[1] = {0}, dout[32] = {1}, dq[32], dk[32], dv[32];
    fa_backward_params bp;
    memset(&bp, 0, sizeof bp);
    setp(&bp.p, 1, 1, 1, 1, 14411518807585600LL, 32, q, k, v, o, lse);
    bp.p.k_row_stride = bp.p.v_row_stride = 0; bp.p.k_head_stride = bp.p.v_head_stride = 0;
    bp.p.k_batch_stride = bp.p.v_batch_stride = 0;
    bp.dout = dout; bp.dq = dq; bp.dk = dk; bp.dv = dv;
    bp.do_row_stride = bp.dq_row_stride = 32;             /* dk, dv strides 0 */
    bp.p.num_threads = 1;
    int st = fa_backward_cpu(&bp, NULL);
    printf("status %d (%s)\n", st, fa_strerror(st));
    return 0;
}
