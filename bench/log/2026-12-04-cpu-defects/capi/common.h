#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include "fa.h"
/* contiguous fp32 (B,H,N,d) params with given buffers */
static void setp(fa_params *p, int64_t B, int64_t Hq, int64_t Hkv, int64_t Nq, int64_t Nk, int64_t d,
                 const float *q, const float *k, const float *v, float *o, float *lse)
{
    memset(p, 0, sizeof *p);
    p->q = q; p->k = k; p->v = v; p->o = o; p->lse = lse;
    p->B = B; p->Hq = Hq; p->Hkv = Hkv; p->Nq = Nq; p->Nk = Nk; p->d = d;
    p->q_row_stride = d; p->q_head_stride = Nq * d; p->q_batch_stride = Hq * Nq * d;
    p->o_row_stride = d; p->o_head_stride = Nq * d; p->o_batch_stride = Hq * Nq * d;
    p->k_row_stride = d; p->k_head_stride = Nk * d; p->k_batch_stride = Hkv * Nk * d;
    p->v_row_stride = d; p->v_head_stride = Nk * d; p->v_batch_stride = Hkv * Nk * d;
    p->scale = 1.0f / sqrtf((float)d);
    p->dtype = FA_FLOAT32;
}
