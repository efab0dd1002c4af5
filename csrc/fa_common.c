/*
 * fa_common.c — what every backend shares: status strings and the parameter
 * checks of fa.h. Plain C11; built into the extension and into the C tests.
 * It also holds the process-wide overrides and the last CUDA error's text.
 * When the library is built without CUDA, fa_forward_cuda lives here and
 * answers FA_ERR_NO_CUDA, as do the kvcache entry points.
 */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "fa.h"
#include "fa_internal.h"

const char *fa_strerror(int status)
{
    switch (status) {
    case FA_OK:                return "success";
    case FA_ERR_NULL_POINTER:  return "a data pointer is NULL";
    case FA_ERR_BAD_SIZE:      return "a size is negative or past 2^40";
    case FA_ERR_HEAD_DIM:      return "head dim d must be in 1..256";
    case FA_ERR_GQA:           return "Hkv must be >= 1 and divide Hq";
    case FA_ERR_BAD_STRIDE:    return "a stride is negative, an offset overflows int64, or output rows overlap";
    case FA_ERR_DTYPE:         return "unknown dtype";
    case FA_ERR_SCALE:         return "scale must be finite, of magnitude at most 2.3e38";
    case FA_ERR_UNSUPPORTED:   return "not supported by this backend";
    case FA_ERR_OUT_OF_MEMORY: return "out of host memory";
    case FA_ERR_NO_CUDA:       return "built without CUDA";
    case FA_ERR_CUDA:          return "a CUDA call failed";
    case FA_ERR_KERNEL_CHOICE: return "the kernel family must be auto, sm90, sm80, fp32tc, fp32 or simt";
    case FA_ERR_SEQLEN:        return "cache_seqlens[b] + Nnew must be in 0..Nmax";
    case FA_ERR_SCRATCH:       return "scratch buffer smaller than fa_kvcache_scratch_bytes";
    case FA_ERR_OVERRIDE:      return "an override is outside its range";
    case FA_ERR_VARIANT:       return "a variant parameter is out of range (align, window, softcap, |scale| / "
                                      "softcap past FA_MAX_SCALE, an ALiBi slope or sink past it, mask_kind "
                                      "or an extra's stride)";
    case FA_ERR_CU_SEQLENS:    return "cu_seqlens must start at 0, not decrease, and stay within max_seqlen and the packed rows";
    default:                   return "unknown status";
    }
}

/* Zero (automatic) until a test or tool sets them. */
static fa_overrides g_overrides;

/* fa_overrides.device_cc: 0, or a compute capability below Hopper that GPUs have. */
static int known_older_cc(int cc)
{
    return cc == 70 || cc == 72 || cc == 75 || cc == 80 || cc == 86 || cc == 87 || cc == 88 || cc == 89;
}

int fa_set_overrides(const fa_overrides *o)
{
    if (o == NULL) {
        memset(&g_overrides, 0, sizeof g_overrides);
        return FA_OK;
    }
    if (o->family < 0 || o->family >= FA_NUM_FAMILIES)
        return FA_ERR_KERNEL_CHOICE;
    if (o->sm90_grid < 0 || o->sm90_grid > 4 || o->sm90_tail < 0 || o->sm90_tail > 4 || o->decode_splits < 0
        || (o->decode_warps != 0 && o->decode_warps != 4 && o->decode_warps != 8)
        || (o->decode_stages != 0 && o->decode_stages != 2 && o->decode_stages != 3)
        || o->decode_cluster < 0 || o->decode_cluster > 2 || o->decode_evict < 0 || o->decode_evict > 2
        || o->decode_combine < 0 || o->decode_combine > 2 || o->split_kv < 0 || o->split_kv > 2 || o->sm90_heads < 0
        || o->sm90_long_tile < 0 || o->sm90_long_tile > 2 || o->sm90_short_tile < 0 || o->sm90_short_tile > 2
        || o->cpu_lanes < 0 || o->cpu_lanes > 2
        || (o->device_cc != 0 && !known_older_cc(o->device_cc)))
        return FA_ERR_OVERRIDE;
    g_overrides = *o;
    return FA_OK;
}

void fa_get_overrides(fa_overrides *o)
{
    *o = g_overrides;
}

int fa_cpu_lanes_override(void)
{
    return g_overrides.cpu_lanes;
}

/* The last CUDA failure's name and text, per thread (fa_record_cuda_error, fa_internal.h). */
static _Thread_local char g_cuda_error[256];

const char *fa_last_cuda_error(void)
{
    return g_cuda_error;
}

int fa_record_cuda_error(const char *name, const char *text)
{
    snprintf(g_cuda_error, sizeof g_cuda_error, "%s: %s", name ? name : "cudaError", text ? text : "");
    return FA_ERR_CUDA;
}

/* Element offsets past this are refused: their byte offsets (elements of at most 4 bytes) and the
 * spans rows_apart forms from them stay well inside int64. */
#define FA_MAX_OFFSET (INT64_MAX / 8)

/* The largest element offset of a k-dim tensor of sizes n and strides s (0 when it is empty), or
 * −1 when it passes FA_MAX_OFFSET. */
static int64_t last_offset_of(int k, const int64_t *n, const int64_t *s)
{
    for (int i = 0; i < k; i++)
        if (n[i] == 0)
            return 0;
    int64_t sum = 0, a;
    for (int i = 0; i < k; i++)
        if (__builtin_mul_overflow(n[i] - 1, s[i], &a) || __builtin_add_overflow(sum, a, &sum) || sum > FA_MAX_OFFSET)
            return -1;
    return sum;
}

/* The same for an (n0, n1, n2, d) tensor with strides s0, s1, s2 and a unit last one. */
static int64_t last_offset(int64_t n0, int64_t s0, int64_t n1, int64_t s1, int64_t n2, int64_t s2, int64_t d)
{
    const int64_t n[4] = {n0, n1, n2, d}, s[4] = {s0, s1, s2, 1};
    return last_offset_of(4, n, s);
}

/* The search below: a term x · coef with lo <= x <= hi, and the most nodes it visits. */
typedef struct {
    __int128 coef;
    int64_t lo, hi;
} meet_term;
#define FA_MEET_BUDGET 65536

/* Whether Σ terms[i..] can equal target, the terms in order of |coef|, largest first, rest[i] the
 * largest |Σ terms[i..]|: each term's candidates are the x that leave a target the rest can reach
 * (two at most where each stride clears the span of the smaller ones). 1 also when the budget runs out. */
static int meet_search(const meet_term *terms, const __int128 *rest, int k, int i, __int128 target, int *budget)
{
    if (--*budget < 0)
        return 1;
    if (i == k)
        return target == 0;
    const meet_term *t = &terms[i];
    const __int128 c = t->coef < 0 ? -t->coef : t->coef, r = rest[i + 1];
    if (c == 0)                                     /* a stride of 0: the term adds nothing */
        return meet_search(terms, rest, k, i + 1, target, budget);
    /* t->coef · x in [target − r, target + r], x in [lo, hi] */
    __int128 from = target - r, to = target + r;
    if (t->coef < 0) {
        const __int128 f = -to;
        to = -from;
        from = f;
    }
    __int128 x0 = from >= 0 ? (from + c - 1) / c : -((-from) / c), x1 = to >= 0 ? to / c : -((-to + c - 1) / c);
    if (x0 < t->lo)
        x0 = t->lo;
    if (x1 > t->hi)
        x1 = t->hi;
    for (__int128 x = x0; x <= x1; x++)
        if (meet_search(terms, rest, k, i + 1, target - t->coef * x, budget))
            return 1;
    return 0;
}

int fa_views_meet(const void *a, const void *b, int64_t elem_bytes, int k, const int64_t *n, const int64_t *sa,
                  const int64_t *sb)
{
    if (k > 8)
        return 1;
    for (int i = 0; i < k; i++)
        if (n[i] == 0)
            return 0;
    /* Byte addresses: A's element x at a + es · Σ sa·x, B's at b + es · Σ sb·y, each es bytes long; they
     * share a byte where Σ es·sa·x + u − Σ es·sb·y − w = b − a for some bytes u, w < es. Dims whose
     * strides agree take x − y as one term. */
    meet_term terms[2 * 8 + 1];
    int m = 0;
    for (int i = 0; i < k; i++) {
        if (n[i] == 1)
            continue;
        if (sa[i] == sb[i]) {
            terms[m++] = (meet_term){(__int128)sa[i] * elem_bytes, -(n[i] - 1), n[i] - 1};
        } else {
            terms[m++] = (meet_term){(__int128)sa[i] * elem_bytes, 0, n[i] - 1};
            terms[m++] = (meet_term){-(__int128)sb[i] * elem_bytes, 0, n[i] - 1};
        }
    }
    terms[m++] = (meet_term){1, -(elem_bytes - 1), elem_bytes - 1};
    for (int i = 1; i < m; i++)                     /* largest |coef| first */
        for (int j = i; j > 0; j--) {
            const __int128 x = terms[j].coef < 0 ? -terms[j].coef : terms[j].coef;
            const __int128 y = terms[j - 1].coef < 0 ? -terms[j - 1].coef : terms[j - 1].coef;
            if (x <= y)
                break;
            const meet_term t = terms[j];
            terms[j] = terms[j - 1];
            terms[j - 1] = t;
        }
    __int128 rest[2 * 8 + 2];
    rest[m] = 0;
    for (int i = m - 1; i >= 0; i--) {
        const __int128 c = terms[i].coef < 0 ? -terms[i].coef : terms[i].coef;
        const int64_t x = -terms[i].lo > terms[i].hi ? -terms[i].lo : terms[i].hi;
        rest[i] = rest[i + 1] + c * x;
    }
    int budget = FA_MEET_BUDGET;
    return meet_search(terms, rest, m, 0, (__int128)((intptr_t)b - (intptr_t)a), &budget);
}

/* Whether an output (n0, n1, n2, d) with strides s0, s1, s2 (unit last) gives every element its own
 * memory: its dims of size > 1, in order of stride, each step past the span of the ones before. */
static int rows_apart(int64_t n0, int64_t s0, int64_t n1, int64_t s1, int64_t n2, int64_t s2, int64_t d)
{
    if (n0 == 0 || n1 == 0 || n2 == 0)
        return 1;                                   /* empty: nothing written */
    int64_t n[3] = {n0, n1, n2}, st[3] = {s0, s1, s2};
    for (int i = 1; i < 3; i++)                     /* sort by stride */
        for (int j = i; j > 0 && st[j] < st[j - 1]; j--) {
            int64_t t = st[j]; st[j] = st[j - 1]; st[j - 1] = t;
            t = n[j]; n[j] = n[j - 1]; n[j - 1] = t;
        }
    int64_t span = d;                               /* elements one index of the next dim must clear */
    for (int i = 0; i < 3; i++) {
        if (n[i] <= 1)
            continue;
        if (st[i] < span)
            return 0;
        if (__builtin_mul_overflow(st[i], n[i], &span))   /* past int64: nothing further fits */
            span = INT64_MAX;
    }
    return 1;
}

/* fa_check_params; packed (varlen) sequences have no batch stride and rows (total_q, total_k)
 * of their own: packed_q, packed_k (−1: not packed). */
static int check_params(const fa_params *p, int64_t packed_q, int64_t packed_k)
{
    if (p == NULL)
        return FA_ERR_NULL_POINTER;
    if (p->B < 0 || p->Hq < 0 || p->Hkv < 0 || p->Nq < 0 || p->Nk < 0 || p->d < 0)
        return FA_ERR_BAD_SIZE;
    if (p->B > FA_MAX_SIZE || p->Hq > FA_MAX_SIZE || p->Hkv > FA_MAX_SIZE || p->Nq > FA_MAX_SIZE
        || p->Nk > FA_MAX_SIZE || packed_q > FA_MAX_SIZE || packed_k > FA_MAX_SIZE)
        return FA_ERR_BAD_SIZE;
    if (p->d < 1 || p->d > FA_MAX_HEAD_DIM)
        return FA_ERR_HEAD_DIM;
    if (p->Hq > 0 && (p->Hkv < 1 || p->Hq % p->Hkv != 0))
        return FA_ERR_GQA;
    if (p->dtype != FA_FLOAT32 && p->dtype != FA_FLOAT16 && p->dtype != FA_BFLOAT16)
        return FA_ERR_DTYPE;
    if (!isfinite(p->scale) || fabsf(p->scale) > FA_MAX_SCALE)
        return FA_ERR_SCALE;
    const int64_t strides[12] = {
        p->q_batch_stride, p->q_head_stride, p->q_row_stride,
        p->k_batch_stride, p->k_head_stride, p->k_row_stride,
        p->v_batch_stride, p->v_head_stride, p->v_row_stride,
        p->o_batch_stride, p->o_head_stride, p->o_row_stride,
    };
    for (int i = 0; i < 12; i++)
        if (strides[i] < 0)
            return FA_ERR_BAD_STRIDE;
    /* Every offset within int64; inputs may repeat rows (stride 0, as expand() makes), but output
     * rows must not overlap, or threads would race on them. Packed: (1, H, total, d). */
    const int packed = packed_q >= 0;
    const int64_t bq = packed ? 1 : p->B, nq = packed ? packed_q : p->Nq, nk = packed ? packed_k : p->Nk;
    if (last_offset(bq, p->q_batch_stride, p->Hq, p->q_head_stride, nq, p->q_row_stride, p->d) < 0
        || last_offset(bq, p->k_batch_stride, p->Hkv, p->k_head_stride, nk, p->k_row_stride, p->d) < 0
        || last_offset(bq, p->v_batch_stride, p->Hkv, p->v_head_stride, nk, p->v_row_stride, p->d) < 0
        || last_offset(bq, p->o_batch_stride, p->Hq, p->o_head_stride, nq, p->o_row_stride, p->d) < 0
        || !rows_apart(bq, p->o_batch_stride, p->Hq, p->o_head_stride, nq, p->o_row_stride, p->d))
        return FA_ERR_BAD_STRIDE;
    /* Pointers are only dereferenced when there is something to read/write. */
    const int has_output = p->B > 0 && p->Hq > 0 && p->Nq > 0;
    if (has_output && p->o == NULL)
        return FA_ERR_NULL_POINTER;
    if (has_output && p->q == NULL)
        return FA_ERR_NULL_POINTER;
    if (has_output && p->Nk > 0 && (p->k == NULL || p->v == NULL))
        return FA_ERR_NULL_POINTER;
    return FA_OK;
}

int fa_check_params(const fa_params *p)
{
    return check_params(p, -1, -1);
}

int fa_has_variants(const fa_variants *v)
{
    return v != NULL && (v->align != FA_ALIGN_TOP_LEFT || v->window || v->softcap != 0.0f || v->alibi_slopes != NULL
                         || v->sinks != NULL || v->key_mask != NULL || v->mask != NULL || v->cu_seqlens_q != NULL);
}

int fa_check_variants(const fa_params *p, const fa_variants *v)
{
    if (p == NULL)
        return FA_ERR_NULL_POINTER;
    const int packed = v != NULL && v->cu_seqlens_q != NULL;
    if (packed && (v->total_q < 0 || v->total_k < 0))
        return FA_ERR_BAD_SIZE;
    const int status = check_params(p, packed ? v->total_q : -1, packed ? v->total_k : -1);
    if (status != FA_OK || v == NULL)
        return status;
    if (v->align != FA_ALIGN_TOP_LEFT && v->align != FA_ALIGN_BOTTOM_RIGHT)
        return FA_ERR_VARIANT;
    if (v->window && (v->window_left < -1 || v->window_right < -1))
        return FA_ERR_VARIANT;
    /* A normal float: its reciprocal is one too (the C backend's tanh takes the scores times it). */
    if (v->softcap != 0.0f && !(v->softcap >= FLT_MIN && v->softcap <= FA_MAX_SCALE))
        return FA_ERR_VARIANT;
    /* The kernels multiply the scores by scale / softcap before the tanh: it must be finite, and
     * normal unless the scale is 0 (a subnormal ratio keeps a few bits of the scale, or none). */
    if (v->softcap != 0.0f) {
        const float ratio = fabsf(p->scale) / v->softcap;
        if (!(ratio <= FA_MAX_SCALE) || (p->scale != 0.0f && !(ratio >= FLT_MIN)))
            return FA_ERR_VARIANT;
    }
    if (v->mask_kind < FA_MASK_NONE || v->mask_kind > FA_MASK_ADD_F32 || (v->mask_kind != FA_MASK_NONE) != (v->mask != NULL))
        return FA_ERR_VARIANT;
    if (v->alibi_batch_stride < 0 || v->key_mask_batch_stride < 0 || v->mask_batch_stride < 0
        || v->mask_head_stride < 0 || v->mask_row_stride < 0 || v->mask_col_stride < 0)
        return FA_ERR_VARIANT;
    /* The extras' offsets too: ALiBi (B, Hq), key_mask (B, Nk), attn_mask (B, Hq, Nq, Nk). */
    const int64_t slopes_n[2] = {p->B, p->Hq}, slopes_s[2] = {v->alibi_batch_stride, 1};
    const int64_t keys_n[2] = {p->B, p->Nk}, keys_s[2] = {v->key_mask_batch_stride, 1};
    const int64_t mask_n[4] = {p->B, p->Hq, p->Nq, p->Nk};
    const int64_t mask_s[4] = {v->mask_batch_stride, v->mask_head_stride, v->mask_row_stride, v->mask_col_stride};
    if ((v->alibi_slopes != NULL && last_offset_of(2, slopes_n, slopes_s) < 0)
        || (v->key_mask != NULL && last_offset_of(2, keys_n, keys_s) < 0)
        || (v->mask != NULL && last_offset_of(4, mask_n, mask_s) < 0))
        return FA_ERR_VARIANT;
    if ((v->cu_seqlens_q == NULL) != (v->cu_seqlens_k == NULL))
        return FA_ERR_NULL_POINTER;
    if (v->cu_seqlens_q != NULL && (v->key_mask != NULL || v->mask != NULL))
        return FA_ERR_VARIANT;
    if (v->cu_seqlens_q != NULL && (v->total_q < 0 || v->total_k < 0))
        return FA_ERR_BAD_SIZE;
    return FA_OK;
}

int fa_check_backward(const fa_backward_params *bp, const fa_variants *v)
{
    if (bp == NULL)
        return FA_ERR_NULL_POINTER;
    const fa_params *p = &bp->p;
    const int status = fa_check_variants(p, v);
    if (status != FA_OK)
        return status;
    const int64_t strides[12] = {bp->do_batch_stride, bp->do_head_stride, bp->do_row_stride, bp->dq_batch_stride,
                                 bp->dq_head_stride, bp->dq_row_stride, bp->dk_batch_stride, bp->dk_head_stride,
                                 bp->dk_row_stride, bp->dv_batch_stride, bp->dv_head_stride, bp->dv_row_stride};
    for (int i = 0; i < 12; i++)
        if (strides[i] < 0)
            return FA_ERR_BAD_STRIDE;
    /* dq like o; dk and dv each key row its own memory; every offset within int64. */
    const int packed = v != NULL && v->cu_seqlens_q != NULL;
    const int64_t bq = packed ? 1 : p->B, nq = packed ? v->total_q : p->Nq, nk = packed ? v->total_k : p->Nk;
    if (last_offset(bq, bp->do_batch_stride, p->Hq, bp->do_head_stride, nq, bp->do_row_stride, p->d) < 0
        || last_offset(bq, bp->dq_batch_stride, p->Hq, bp->dq_head_stride, nq, bp->dq_row_stride, p->d) < 0
        || last_offset(bq, bp->dk_batch_stride, p->Hkv, bp->dk_head_stride, nk, bp->dk_row_stride, p->d) < 0
        || last_offset(bq, bp->dv_batch_stride, p->Hkv, bp->dv_head_stride, nk, bp->dv_row_stride, p->d) < 0
        || !rows_apart(bq, bp->dq_batch_stride, p->Hq, bp->dq_head_stride, nq, bp->dq_row_stride, p->d)
        || !rows_apart(bq, bp->dk_batch_stride, p->Hkv, bp->dk_head_stride, nk, bp->dk_row_stride, p->d)
        || !rows_apart(bq, bp->dv_batch_stride, p->Hkv, bp->dv_head_stride, nk, bp->dv_row_stride, p->d))
        return FA_ERR_BAD_STRIDE;
    if (fa_backward_is_empty(p))
        return FA_OK;
    /* dk and dv are written whenever there are keys (zeros without queries), from k and v. */
    if ((p->Nq > 0 && p->Hq > 0 && (bp->dout == NULL || bp->dq == NULL || p->lse == NULL || p->o == NULL
                                    || p->q == NULL))
        || (p->Nk > 0 && (bp->dk == NULL || bp->dv == NULL || p->k == NULL || p->v == NULL)))
        return FA_ERR_NULL_POINTER;
    return FA_OK;
}

/* Host cu_seqlens (the CPU backend): 0 first, never decreasing, each length within max_seqlen
 * (*len), the last entry within the packed rows. On success *len is the longest sequence's length,
 * which sizes the work (a max_seqlen of 2^40 over tiny tensors looped for minutes). */
int fa_check_cu_seqlens(const int32_t *cu, int64_t B, int64_t *len, int64_t total)
{
    if (cu[0] != 0)
        return FA_ERR_CU_SEQLENS;
    int64_t longest = 0;
    for (int64_t b = 0; b < B; b++) {
        if (cu[b + 1] < cu[b] || cu[b + 1] - cu[b] > *len)
            return FA_ERR_CU_SEQLENS;
        longest = cu[b + 1] - cu[b] > longest ? cu[b + 1] - cu[b] : longest;
    }
    if (cu[B] > total)
        return FA_ERR_CU_SEQLENS;
    *len = longest;
    return FA_OK;
}

int fa_kvcache_variants(const fa_kvcache_params *kp, const fa_variants *v_in, fa_variants *v)
{
    if (v_in != NULL)
        *v = *v_in;
    else
        memset(v, 0, sizeof *v);
    if (v->key_mask != NULL || v->mask != NULL || v->cu_seqlens_q != NULL)
        return FA_ERR_VARIANT;
    v->align = FA_ALIGN_BOTTOM_RIGHT;           /* the queries are the last Nq of each sequence */
    return fa_check_variants(&kp->p, v);
}

int fa_check_kvcache_params(const fa_kvcache_params *kp)
{
    if (kp == NULL)
        return FA_ERR_NULL_POINTER;
    const int status = fa_check_params(&kp->p);
    if (status != FA_OK)
        return status;
    if (kp->Nnew < 0)
        return FA_ERR_BAD_SIZE;
    if ((kp->k_new == NULL) != (kp->v_new == NULL) || (kp->Nnew > 0 && kp->k_new == NULL))
        return FA_ERR_NULL_POINTER;
    if (kp->Nnew > FA_MAX_SIZE)
        return FA_ERR_BAD_SIZE;
    const int64_t strides[6] = {kp->kn_batch_stride, kp->kn_head_stride, kp->kn_row_stride,
                                kp->vn_batch_stride, kp->vn_head_stride, kp->vn_row_stride};
    for (int i = 0; i < 6; i++)
        if (strides[i] < 0)
            return FA_ERR_BAD_STRIDE;
    /* Appending writes the caches: each of their rows its own memory, and there they must be. */
    const fa_params *p = &kp->p;
    const int64_t nnew = kp->k_new != NULL ? kp->Nnew : 0;
    if (nnew > 0 && p->B > 0 && p->Hkv > 0) {
        if (p->k == NULL || p->v == NULL)
            return FA_ERR_NULL_POINTER;
        const int64_t new_end[2] = {
            last_offset(p->B, kp->kn_batch_stride, p->Hkv, kp->kn_head_stride, nnew, kp->kn_row_stride, p->d),
            last_offset(p->B, kp->vn_batch_stride, p->Hkv, kp->vn_head_stride, nnew, kp->vn_row_stride, p->d)};
        if (new_end[0] < 0 || new_end[1] < 0
            || !rows_apart(p->B, p->k_batch_stride, p->Hkv, p->k_head_stride, p->Nk, p->k_row_stride, p->d)
            || !rows_apart(p->B, p->v_batch_stride, p->Hkv, p->v_head_stride, p->Nk, p->v_row_stride, p->d))
            return FA_ERR_BAD_STRIDE;
        /* Both caches are written: no element of one in the other's memory (interleaved K and V
         * rows of one buffer are apart). */
        const int64_t es = p->dtype == FA_FLOAT32 ? 4 : 2;
        const int64_t n[4] = {p->B, p->Hkv, p->Nk, p->d};
        const int64_t sk[4] = {p->k_batch_stride, p->k_head_stride, p->k_row_stride, 1};
        const int64_t sv[4] = {p->v_batch_stride, p->v_head_stride, p->v_row_stride, 1};
        if (fa_views_meet(p->k, p->v, es, 4, n, sk, sv))
            return FA_ERR_BAD_STRIDE;
        /* The new rows are read while the caches are written: neither within a cache's span. */
        const char *news[2] = {kp->k_new, kp->v_new}, *caches[2] = {p->k, p->v};
        const int64_t cache_end[2] = {
            last_offset(p->B, p->k_batch_stride, p->Hkv, p->k_head_stride, p->Nk, p->k_row_stride, p->d),
            last_offset(p->B, p->v_batch_stride, p->Hkv, p->v_head_stride, p->Nk, p->v_row_stride, p->d)};
        for (int a = 0; a < 2; a++)
            for (int c = 0; c < 2; c++)
                if ((uintptr_t)news[a] <= (uintptr_t)caches[c] + (uintptr_t)((cache_end[c] + 1) * es) - 1
                    && (uintptr_t)caches[c] <= (uintptr_t)news[a] + (uintptr_t)((new_end[a] + 1) * es) - 1)
                    return FA_ERR_BAD_STRIDE;
    }
    return FA_OK;
}

#ifndef FA_WITH_CUDA
int fa_kvcache_scratch_bytes(const fa_kvcache_params *kp, size_t *bytes)
{
    (void)kp;
    if (bytes != NULL)
        *bytes = 0;
    return FA_ERR_NO_CUDA;
}

int fa_forward_kvcache_cuda(const fa_kvcache_params *kp, void *scratch, size_t scratch_bytes,
                            struct CUstream_st *stream)
{
    (void)kp;
    (void)scratch;
    (void)scratch_bytes;
    (void)stream;
    return FA_ERR_NO_CUDA;
}

int fa_forward_cuda(const fa_params *p, struct CUstream_st *stream)
{
    (void)p;
    (void)stream;
    return FA_ERR_NO_CUDA;
}

int fa_forward_variants_cuda(const fa_params *p, const fa_variants *v, struct CUstream_st *stream)
{
    (void)p;
    (void)v;
    (void)stream;
    return FA_ERR_NO_CUDA;
}

int fa_forward_variants_cuda_scratch(const fa_params *p, const fa_variants *v, void *scratch, size_t scratch_bytes,
                                     struct CUstream_st *stream)
{
    (void)p;
    (void)v;
    (void)scratch;
    (void)scratch_bytes;
    (void)stream;
    return FA_ERR_NO_CUDA;
}

int fa_forward_scratch_bytes(const fa_params *p, size_t *bytes)
{
    (void)p;
    *bytes = 0;
    return FA_ERR_NO_CUDA;
}

int fa_forward_variants_scratch_bytes(const fa_params *p, const fa_variants *v, size_t *bytes)
{
    (void)p;
    (void)v;
    *bytes = 0;
    return FA_ERR_NO_CUDA;
}

int fa_forward_cuda_scratch(const fa_params *p, void *scratch, size_t scratch_bytes, struct CUstream_st *stream)
{
    (void)p;
    (void)scratch;
    (void)scratch_bytes;
    (void)stream;
    return FA_ERR_NO_CUDA;
}

int fa_backward_workspace_bytes(const fa_backward_params *bp, const fa_variants *v, size_t *bytes)
{
    (void)bp;
    (void)v;
    if (bytes != NULL)
        *bytes = 0;
    return FA_ERR_NO_CUDA;
}

int fa_backward_cuda(const fa_backward_params *bp, const fa_variants *v, void *workspace, size_t workspace_bytes,
                     struct CUstream_st *stream)
{
    (void)bp;
    (void)v;
    (void)workspace;
    (void)workspace_bytes;
    (void)stream;
    return FA_ERR_NO_CUDA;
}

size_t fa_naive_scratch_bytes(const fa_params *p)
{
    (void)p;
    return 0;
}

int fa_naive_forward(const fa_params *p, float *scratch, struct CUstream_st *stream)
{
    (void)p;
    (void)scratch;
    (void)stream;
    return FA_ERR_NO_CUDA;
}
#endif
