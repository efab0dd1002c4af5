/* fa_forward_variants_cpu with a window bound of INT64_MAX (accepted: the check is only >= -1,
 * "a huge window" = unbounded). fa_key_range computes i + delta + window_right + 1 and
 * i + delta - window_left in int64, which overflow: the key range comes out empty, the row gets
 * O = 0, lse = -inf and FA_OK. Expected O = v (the single/only visible key), lse = q.k*scale. */
#include "common.h"
int main(void)
{
    float q[4] = {1, 0, 0, 0}, k[4] = {1, 0, 0, 0}, v[4] = {5, 6, 7, 8}, o[12], lse[3];
    fa_params p;
    fa_variants var;

    /* (a) top-left, window_left = -1, window_right = INT64_MAX, Nq = Nk = 1 */
    setp(&p, 1, 1, 1, 1, 1, 4, q, k, v, o, lse);
    memset(&var, 0, sizeof var);
    var.window = 1; var.window_left = -1; var.window_right = INT64_MAX;
    int st = fa_forward_variants_cpu(&p, &var);
    printf("(a) status %d  o = %g %g %g %g  lse = %g   (expected 5 6 7 8, lse 0.5)\n", st, o[0], o[1], o[2], o[3], lse[0]);

    /* (b) bottom-right (delta = Nk - Nq = -2), window_left = INT64_MAX, window_right = -1, Nq = 3, Nk = 1:
     * query 0: i + delta - left = -2 - INT64_MAX overflows. Query rows share q row (stride 0). */
    setp(&p, 1, 1, 1, 3, 1, 4, q, k, v, o, lse);
    p.q_row_stride = 0;
    memset(&var, 0, sizeof var);
    var.align = FA_ALIGN_BOTTOM_RIGHT; var.window = 1; var.window_left = INT64_MAX; var.window_right = -1;
    st = fa_forward_variants_cpu(&p, &var);
    printf("(b) status %d  row0 o = %g %g %g %g lse %g; row2 o = %g %g %g %g lse %g  (expected every row 5 6 7 8, lse 0.5)\n",
           st, o[0], o[1], o[2], o[3], lse[0], o[8], o[9], o[10], o[11], lse[2]);
    return 0;
}
