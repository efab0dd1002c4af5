/* fa_forward_kvcache_cpu on an empty problem (Hq = Hkv = 0, Nq = Nk = 0, no pointers) with
 * B = 2^61 + 1: malloc(sizeof(int64_t) * B) wraps to malloc(8) and the per-batch loop writes
 * n_keys[b] past it (heap overflow). */
#include "common.h"
int main(void)
{
    fa_kvcache_params kp;
    memset(&kp, 0, sizeof kp);
    kp.p.B = ((int64_t)1 << 61) + 1;
    kp.p.d = 1;
    kp.p.o_batch_stride = 1;   /* B > 1 needs o_batch_stride >= d */
    kp.p.scale = 1.0f;
    kp.p.dtype = FA_FLOAT32;
    int st = fa_forward_kvcache_cpu(&kp);
    printf("status %d (%s)\n", st, fa_strerror(st));
    return 0;
}
