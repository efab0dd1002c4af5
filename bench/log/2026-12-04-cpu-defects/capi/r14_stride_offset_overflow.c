/* Strides whose offsets overflow int64 are accepted: B = 3, q_batch_stride = 2^62 passes
 * check_params (only stride >= 0 is checked); seq_of computes b * q_batch_stride = 2^63 (signed
 * overflow, UB) and reads at a wrapped address. Strictly a caller buffer error the library
 * cannot see in general, but an overflowing offset is detectable from the parameters alone
 * ((B-1)*batch + (H-1)*head + (N-1)*row + d must fit in int64 / the address space). */
#include "common.h"
int main(void)
{
    static float q[12], k[12], v[12], o[12];
    fa_params p;
    setp(&p, 3, 1, 1, 1, 1, 4, q, k, v, o, NULL);
    p.q_batch_stride = (int64_t)1 << 62;
    int st = fa_forward_cpu(&p);
    printf("status %d (%s)\n", st, fa_strerror(st));
    return 0;
}
