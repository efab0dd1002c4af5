/* fa_backward_cpu on a 1x1x1x1 problem with num_threads = 100000: the backward's parallel region
 * uses num_threads(p->num_threads) unbounded by the B*Hkv work items; libgomp crashes (SIGSEGV in
 * GOMP_parallel) trying to start 100000 threads. Forward (run_blocks) bounds it by the items. */
#include "common.h"
int main(int argc, char **argv)
{
    float q[4] = {1, 0, 0, 0}, k[4] = {1, 0, 0, 0}, v[4] = {1, 2, 3, 4}, o[4], lse[1], dout[4] = {1, 1, 1, 1}, dq[4], dk[4], dv[4];
    fa_backward_params bp;
    memset(&bp, 0, sizeof bp);
    setp(&bp.p, 1, 1, 1, 1, 1, 4, q, k, v, o, lse);
    if (fa_forward_cpu(&bp.p) != FA_OK) return 1;
    bp.dout = dout; bp.dq = dq; bp.dk = dk; bp.dv = dv;
    bp.do_row_stride = bp.dq_row_stride = bp.dk_row_stride = bp.dv_row_stride = 4;
    bp.p.num_threads = argc > 1 ? atoi(argv[1]) : 100000;
    int st = fa_backward_cpu(&bp, NULL);
    printf("backward status %d (%s)\n", st, fa_strerror(st));
    return 0;
}
