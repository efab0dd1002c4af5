/* fa_forward_cpu, Hq = Hkv = 100000 heads of one query (d = 1, inputs with zero strides, output
 * 400 KB), num_threads = 100000: run_blocks bounds the team by the work items (100000 here),
 * libgomp crashes starting them. */
#include "common.h"
int main(void)
{
    static float o[100000];
    float q[1] = {1}, k[1] = {1}, v[1] = {2};
    fa_params p;
    setp(&p, 1, 100000, 100000, 1, 1, 1, q, k, v, o, NULL);
    p.q_head_stride = p.k_head_stride = p.v_head_stride = 0; p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = 0;
    p.num_threads = 100000;
    int st = fa_forward_cpu(&p);
    printf("status %d o[99999] = %g\n", st, o[99999]);
    return 0;
}
