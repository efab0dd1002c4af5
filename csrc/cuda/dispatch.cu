/*
 * dispatch.cu — fa_forward_cuda: checks the parameters and picks the kernel family (families.h).
 * The only caller of the families. fa_overrides.family (fa.h) forces one:
 *
 *     sm90     the Hopper kernel, fp16/bf16 on compute capability 9.0 (sm90.cu)
 *     sm80     the tensor-core kernel, fp16/bf16 (sm80.cu)
 *     fp32tc   fp32 on tensor cores, three TF32 products per product (fp32tc.cu)
 *     fp32     fp32 on CUDA cores, FFMA only (fp32.cu)
 *     simt     the CUDA-core kernel, every dtype (simt.cu)
 *     turing   Turing's tensor cores, fp16 on compute capability 7.5 and later (turing.cu)
 *     auto     the fastest family that supports the problem
 *
 * A forced family that cannot run the problem answers FA_ERR_UNSUPPORTED rather than silently
 * running another one. fa.h's variants (fa_forward_variants_cuda) run on the Hopper family (all
 * but packed sequences) and the sm_80 family (all); the others answer FA_ERR_UNSUPPORTED for them.
 * Under the automatic
 * choice, a non-causal call with a long run of keys and too few query tiles to fill the GPU goes to
 * the split-KV kernel (decode.cu), given its scratch; so does a call with at most two of its 16-row
 * tiles of queries per KV head, with or without variants (a decoding step; plan.h).
 */
#include <string.h>

#include "families.h"
#include "plan.h"

/* The split-KV route (plan.c, fa_plan_split_kv) on the current device (its info is cached). */
static int use_split_kv(const fa_params *p, const fa_overrides *o, int *yes)
{
    int dev;
    fa_device info;
    const int st = fa_device_current(&dev, &info);
    *yes = st == FA_OK && fa_plan_split_kv(p, o, info.sms, info.major >= 8);
    return st;
}

static fa_kvcache_params as_kvcache(const fa_params *p)
{
    fa_kvcache_params kp;
    memset(&kp, 0, sizeof kp);
    kp.p = *p;
    return kp;
}

/* The Hopper kernel's scratch for a call (v NULL: plain), where that kernel would run it (fp16/bf16
 * under the automatic choice or sm90, compute capability 9.0); *bytes stays as it is elsewhere and
 * is 0 for a call the kernel declines. */
static int sm90_scratch_bytes(const fa_params *p, const fa_variants *v, const fa_overrides *o, size_t *bytes)
{
    if (p->dtype == FA_FLOAT32 || (o->family != FA_FAMILY_AUTO && o->family != FA_FAMILY_SM90))
        return FA_OK;
    int dev;
    fa_device info;
    const int st = fa_device_current(&dev, &info);
    if (st != FA_OK)
        return st;
    if (info.major == 9 && info.minor == 0
        && (v ? fa_sm90_variants_scratch_bytes(p, v, o, bytes) : fa_sm90_scratch_bytes(p, o, bytes)) != FA_OK)
        *bytes = 0;
    return FA_OK;
}

/* Scratch of the split-KV route, or of the Hopper kernel's split last round (fp16/bf16 under the
 * automatic choice or sm90, on compute capability 9.0). */
extern "C" int fa_forward_scratch_bytes(const fa_params *p, size_t *bytes)
{
    *bytes = 0;
    int st = fa_check_params(p);
    if (st != FA_OK)
        return st;
    fa_overrides o;
    fa_get_overrides(&o);
    if (p->B == 0 || p->Hq == 0 || p->Nq == 0)
        return FA_OK;
    int split_kv;
    if ((st = use_split_kv(p, &o, &split_kv)) != FA_OK)
        return st;
    if (split_kv) {
        const fa_kvcache_params kp = as_kvcache(p);
        if (fa_kvcache_scratch_bytes(&kp, bytes) == FA_OK)
            return FA_OK;
        *bytes = 0;                                 /* a shape the split-KV kernel does not take */
    }
    return sm90_scratch_bytes(p, NULL, &o, bytes);
}

extern "C" int fa_forward_cuda(const fa_params *p, struct CUstream_st *stream)
{
    return fa_forward_cuda_scratch(p, NULL, 0, stream);
}

extern "C" int fa_forward_cuda_scratch(const fa_params *p, void *scratch, size_t scratch_bytes,
                                       struct CUstream_st *stream)
{
    int st = fa_check_params(p);
    if (st != FA_OK)
        return st;
    fa_overrides o;
    fa_get_overrides(&o);
    if (p->B == 0 || p->Hq == 0 || p->Nq == 0)
        return FA_OK;

    switch (o.family) {
    case FA_FAMILY_AUTO: {
        int split_kv;
        if ((st = use_split_kv(p, &o, &split_kv)) != FA_OK)
            return st;
        if (split_kv) {
            const fa_kvcache_params kp = as_kvcache(p);
            size_t need = 0;
            /* Unsupported shapes, and callers that gave less scratch than it needs, take the
             * forward families below. */
            if (fa_kvcache_scratch_bytes(&kp, &need) == FA_OK && scratch_bytes >= need
                && (need == 0 || scratch != NULL)) {
                st = fa_forward_kvcache_cuda(&kp, scratch, scratch_bytes, stream);
                if (st != FA_ERR_UNSUPPORTED)       /* e.g. grids past 2³¹ CTAs: the families below */
                    return st;
            }
        }
        /* fp16/bf16: the Hopper kernel on compute capability 9.0, else (or for what it does not
         * take) the sm_80 kernel, else for fp16 the Turing kernel (7.5); fp32: the 3xTF32
         * tensor-core kernel (d <= 128, sm_80+), else the FFMA kernel (sm_80+); the CUDA-core
         * kernel for what none takes (Nk == 0; bf16 and fp32 below sm_80). */
        st = FA_ERR_UNSUPPORTED;
        if (p->dtype == FA_FLOAT32) {
            st = fa_fp32tc_forward(p, stream);
            if (st == FA_ERR_UNSUPPORTED)
                st = fa_fp32_forward(p, stream);
        } else {
            st = fa_sm90_forward(p, &o, scratch, scratch_bytes, stream);
            if (st == FA_ERR_UNSUPPORTED)
                st = fa_sm80_forward(p, stream);
            if (st == FA_ERR_UNSUPPORTED)
                st = fa_turing_forward(p, stream);
        }
        return st == FA_ERR_UNSUPPORTED ? fa_simt_forward(p, stream) : st;
    }
    case FA_FAMILY_SM90:
        return fa_sm90_forward(p, &o, scratch, scratch_bytes, stream);
    case FA_FAMILY_SM80:
        return fa_sm80_forward(p, stream);
    case FA_FAMILY_FP32TC:
        return fa_fp32tc_forward(p, stream);
    case FA_FAMILY_FP32:
        return fa_fp32_forward(p, stream);
    case FA_FAMILY_TURING:
        return fa_turing_forward(p, stream);
    default:
        return fa_simt_forward(p, stream);
    }
}

/* Scratch of a call with variants: the split-KV route's (plan.h, fa_plan_decode_variants), else the
 * Hopper kernel's (a packed call's tile counter; for sinks alone, the split last round's), else none. */
extern "C" int fa_forward_variants_scratch_bytes(const fa_params *p, const fa_variants *v, size_t *bytes)
{
    *bytes = 0;
    const int st = fa_check_variants(p, v);
    if (st != FA_OK)
        return st;
    if (!fa_has_variants(v))
        return fa_forward_scratch_bytes(p, bytes);
    fa_overrides o;
    fa_get_overrides(&o);
    if (p->B == 0 || p->Hq == 0 || p->Nq == 0)
        return FA_OK;
    if (fa_plan_decode_variants(p, v, &o)) {
        const fa_kvcache_params kp = as_kvcache(p);
        if (fa_decode_attention_scratch_bytes(&kp, v, bytes) == FA_OK)
            return FA_OK;
        *bytes = 0;                                 /* a shape the split-KV kernel does not take */
    }
    return sm90_scratch_bytes(p, v, &o, bytes);
}

extern "C" int fa_forward_variants_cuda(const fa_params *p, const fa_variants *v, struct CUstream_st *stream)
{
    return fa_forward_variants_cuda_scratch(p, v, NULL, 0, stream);
}

/* Calls with variants, fp16/bf16: few queries per KV head on the split-KV kernel (given its
 * scratch), else the Hopper kernel (compute capability 9.0; the tile counter of its packed walk in the
 * scratch), else the sm_80 kernel (sm_80+), automatic or forced; everything else (fp32, older
 * devices, the other families forced) answers FA_ERR_UNSUPPORTED. */
extern "C" int fa_forward_variants_cuda_scratch(const fa_params *p, const fa_variants *v, void *scratch,
                                                size_t scratch_bytes, struct CUstream_st *stream)
{
    const int st = fa_check_variants(p, v);
    if (st != FA_OK)
        return st;
    if (!fa_has_variants(v))
        return fa_forward_cuda_scratch(p, scratch, scratch_bytes, stream);
    fa_overrides o;
    fa_get_overrides(&o);
    if (p->B == 0 || p->Hq == 0 || p->Nq == 0)
        return FA_OK;
    if (fa_plan_decode_variants(p, v, &o)) {
        const fa_kvcache_params kp = as_kvcache(p);
        size_t need = 0;
        /* Shapes it does not take, and callers that gave less scratch than it needs: the kernels below. */
        if (fa_decode_attention_scratch_bytes(&kp, v, &need) == FA_OK && scratch_bytes >= need
            && (need == 0 || scratch != NULL)) {
            const int st1 = fa_decode_attention_cuda(&kp, v, scratch, scratch_bytes, stream);
            if (st1 != FA_ERR_UNSUPPORTED)
                return st1;
        }
    }
    if (o.family == FA_FAMILY_SM80)
        return fa_sm80_forward_variants(p, v, stream);
    if (o.family != FA_FAMILY_AUTO && o.family != FA_FAMILY_SM90)
        return FA_ERR_UNSUPPORTED;
    const int st2 = fa_sm90_forward_variants(p, v, &o, scratch, scratch_bytes, stream);
    return st2 == FA_ERR_UNSUPPORTED && o.family == FA_FAMILY_AUTO ? fa_sm80_forward_variants(p, v, stream) : st2;
}

/* The backward pass: the Hopper kernel where it takes the call, else the sm_80 tensor-core kernel, under
 * the automatic choice; forcing sm90 runs only the Hopper kernel, forcing sm80 only the sm_80 one (both
 * use the same workspace); other families answer FA_ERR_UNSUPPORTED. */
static int backward_family(void)
{
    fa_overrides o;
    fa_get_overrides(&o);
    return o.family == FA_FAMILY_AUTO || o.family == FA_FAMILY_SM80 || o.family == FA_FAMILY_SM90 ? o.family : -1;
}

static int backward_family_ok(void)
{
    return backward_family() >= 0;
}

extern "C" int fa_backward_workspace_bytes(const fa_backward_params *bp, const fa_variants *v, size_t *bytes)
{
    *bytes = 0;
    const int st = fa_check_backward(bp, v);
    if (st != FA_OK || fa_backward_is_empty(&bp->p))
        return st;
    return backward_family_ok() ? fa_sm80_backward_workspace_bytes(bp, v, bytes) : FA_ERR_UNSUPPORTED;
}

extern "C" int fa_backward_cuda(const fa_backward_params *bp, const fa_variants *v, void *workspace,
                                size_t workspace_bytes, struct CUstream_st *stream)
{
    const int st = fa_check_backward(bp, v);
    if (st != FA_OK || fa_backward_is_empty(&bp->p))
        return st;
    const int family = backward_family();
    if (family < 0)
        return FA_ERR_UNSUPPORTED;
    if (family != FA_FAMILY_SM80) {
        const int st2 = fa_sm90_backward(bp, v, workspace, workspace_bytes, stream);
        if (st2 != FA_ERR_UNSUPPORTED || family == FA_FAMILY_SM90)
            return st2;
    }
    return fa_sm80_backward(bp, v, workspace, workspace_bytes, stream);
}
