/* num_threads = 1000000 on a 1-query kvcache call (and the backward): the append loop and the
 * backward open "#pragma omp parallel num_threads(p->num_threads)" without bounding it by the work
 * (run_blocks does bound it). libgomp then tries to start that many threads; when that fails it
 * calls gomp_fatal(), which prints and exit()s the process. fa.h: "never exit, abort or print". */
#include "common.h"
int main(int argc, char **argv)
{
    float q[4] = {1, 0, 0, 0}, o[4], kc[8] = {0}, vc[8] = {0}, kn[4] = {1, 2, 3, 4}, vn[4] = {1, 2, 3, 4};
    fa_kvcache_params kp;
    memset(&kp, 0, sizeof kp);
    setp(&kp.p, 1, 1, 1, 1, 2, 4, q, kc, vc, o, NULL);
    kp.k_new = kn; kp.v_new = vn; kp.Nnew = 1;
    kp.p.num_threads = argc > 1 ? atoi(argv[1]) : 1000000;
    int st = fa_forward_kvcache_cpu(&kp);
    printf("kvcache status %d (%s)\n", st, fa_strerror(st));
    fflush(stdout);
    return 0;
}
