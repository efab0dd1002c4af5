/*
 * fa.h — the torch-free C interface of torch-flashattn.
 *
 * Exact attention O = softmax(Q Kᵀ · scale) V computed the FlashAttention way
 * (tiles of Q, K, V and an online softmax; the Nq×Nk score matrix is never
 * stored). Every backend (the C CPU backend in fa_cpu.c, the CUDA kernels in
 * dispatch.cu) is reached through this header only, so the kernels can be
 * built and called from plain C with no PyTorch at all:
 *
 *     fa_params p;
 *     memset(&p, 0, sizeof p);            // zero first, then fill
 *     p.q = q; p.k = k; p.v = v; p.o = o; // ... sizes, strides, dtype
 *     p.scale = 1.0f / sqrtf((float)d);
 *     int st = fa_forward_cpu(&p);        // FA_OK or an error status
 *     if (st != FA_OK) fprintf(stderr, "%s\n", fa_strerror(st));
 *
 * Layout: q (B, Hq, Nq, d), k and v (B, Hkv, Nk, d), o (B, Hq, Nq, d), all
 * with the last dimension contiguous and arbitrary strides (in elements) for
 * batch, head and row; lse (B, Hq, Nq) fp32, contiguous, optional.
 * Hkv divides Hq (grouped-query attention): query head h reads kv head
 * h / (Hq / Hkv). causal is the top-left aligned mask of PyTorch SDPA:
 * query row i sees keys j <= i.
 *
 * The entry points validate the parameters, return a status and never exit,
 * abort or print. Compiles as C (C99 and later) and as C++.
 */
#ifndef FA_H
#define FA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FA_MAX_HEAD_DIM 256
/* The largest size (B, H, N) and |scale| or softcap taken: a size past 2^40 or a product of sizes past
 * int64 is FA_ERR_BAD_SIZE; a scale or softcap whose product with log2 e overflows float is
 * FA_ERR_SCALE / FA_ERR_VARIANT. */
#define FA_MAX_SIZE ((int64_t)1 << 40)
#define FA_MAX_SCALE 2.3e38f

typedef enum {
    FA_FLOAT32 = 0,
    FA_FLOAT16 = 1,
    FA_BFLOAT16 = 2,
} fa_dtype;

typedef enum {
    FA_OK = 0,
    FA_ERR_NULL_POINTER,     /* a data pointer needed for a non-empty problem is NULL */
    FA_ERR_BAD_SIZE,         /* a size is negative or past FA_MAX_SIZE */
    FA_ERR_HEAD_DIM,         /* d outside 1..FA_MAX_HEAD_DIM */
    FA_ERR_GQA,              /* Hkv < 1 or Hkv does not divide Hq */
    FA_ERR_BAD_STRIDE,       /* a negative stride, an element offset past INT64_MAX / 8, output
                                strides (o, dq, dk, dv, a written cache) that make rows overlap, or
                                k_new / v_new within the span of a cache they are appended to */
    FA_ERR_DTYPE,            /* dtype is not one of fa_dtype */
    FA_ERR_SCALE,            /* scale is NaN, infinite or past ±FA_MAX_SCALE */
    FA_ERR_UNSUPPORTED,      /* valid, but this backend cannot run it */
    FA_ERR_OUT_OF_MEMORY,    /* host scratch allocation failed */
    FA_ERR_NO_CUDA,          /* built without CUDA */
    FA_ERR_CUDA,             /* a CUDA runtime call or kernel launch failed */
    FA_ERR_KERNEL_CHOICE,    /* fa_overrides.family names no known kernel family */
    FA_ERR_SEQLEN,           /* a cache_seqlens entry (plus the appended keys) is outside 0..Nmax */
    FA_ERR_SCRATCH,          /* the scratch buffer is smaller than fa_kvcache_scratch_bytes says */
    FA_ERR_OVERRIDE,         /* an fa_overrides field is outside its range */
    FA_ERR_VARIANT,          /* a variant field is out of range: align, window < −1, softcap <= 0,
                                not finite or past FA_MAX_SCALE, |scale| / softcap past FA_MAX_SCALE,
                                mask_kind, a negative variant stride,
                                or an ALiBi, key_mask or mask offset past INT64_MAX / 8; in the
                                CPU backend also an ALiBi slope or a sink (but −inf) past
                                ±FA_MAX_SCALE */
    FA_ERR_CU_SEQLENS,       /* cu_seqlens do not start at 0, decrease, pass max_seqlen or the rows
                                of the packed tensors (checked where they are host memory) */
    FA_NUM_STATUS
} fa_status;

typedef struct {
    /* Data, in the element type given by dtype (lse is always float). */
    const void *q;           /* (B, Hq,  Nq, d) */
    const void *k;           /* (B, Hkv, Nk, d) */
    const void *v;           /* (B, Hkv, Nk, d) */
    void *o;                 /* (B, Hq,  Nq, d) */
    float *lse;              /* (B, Hq, Nq) contiguous, natural log; NULL: not written */

    /* Strides in elements; the last dimension of every tensor is contiguous. */
    int64_t q_batch_stride, q_head_stride, q_row_stride;
    int64_t k_batch_stride, k_head_stride, k_row_stride;
    int64_t v_batch_stride, v_head_stride, v_row_stride;
    int64_t o_batch_stride, o_head_stride, o_row_stride;

    /* Sizes. */
    int64_t B, Hq, Hkv, Nq, Nk, d;

    float scale;             /* multiplies Q Kᵀ; usually 1/sqrt(d) */
    int causal;              /* nonzero: query i sees keys j <= i (top-left; fa_variants moves it) */
    fa_dtype dtype;          /* of q, k, v and o */
    int num_threads;         /* CPU backend: OpenMP threads; 0 = OpenMP's default; at most 4 per processor */

} fa_params;

/* The variants of attention, beside an fa_params (fa_forward_variants_*). */
typedef struct {
    /* Zero / NULL in every field is plain attention. For query i and key j of one sequence (Nq_b
     * queries, Nk_b keys), δ = 0 (FA_ALIGN_TOP_LEFT) or Nk_b − Nq_b (FA_ALIGN_BOTTOM_RIGHT):
     *   s = scale · q_i · k_j;  softcap c: s = c · tanh(s / c);  ALiBi: s −= slope · |i + δ − j|;
     *   a float mask: s += mask[b, h, i, j];
     *   key j is visible when j >= i + δ − window_left (window_left >= 0), j <= i + δ + window_right
     *   (window_right >= 0; causal makes it 0), key_mask[b, j] != 0 and a bool mask[b, h, i, j] != 0;
     *   softmax over the visible keys, plus exp(sinks[h]) in the denominator when sinks is given;
     *   lse = ln of that denominator. A row with no visible key and no sink: O = 0, lse = −inf. */
    int align;               /* fa_align */
    int window;              /* nonzero: window_left / window_right apply (−1: that side unbounded) */
    int64_t window_left, window_right;
    float softcap;           /* > 0: the tanh cap; 0: none */
    /* The slopes and sinks of magnitude at most FA_MAX_SCALE (a sink may be −inf: no sink); past it,
     * × log2 e leaves a float: the CPU backend refuses them, the CUDA kernels give NaN rows. */
    const float *alibi_slopes;          /* (Hq), or (B, Hq) with alibi_batch_stride > 0 */
    int64_t alibi_batch_stride;
    const float *sinks;                 /* (Hq) */
    const uint8_t *key_mask;            /* (B, Nk) bytes, nonzero: the key takes part */
    int64_t key_mask_batch_stride;
    const void *mask;                   /* SDPA's attn_mask seen as (B, Hq, Nq, Nk) through its strides */
    int mask_kind;                      /* fa_mask_kind */
    int64_t mask_batch_stride, mask_head_stride, mask_row_stride, mask_col_stride;   /* 0: broadcast */

    /* Varlen (packed sequences): when cu_seqlens_q is given, B sequences lie along the rows of q,
     * o (cu_seqlens_q[b] .. cu_seqlens_q[b + 1]) and k, v (cu_seqlens_k); the batch strides are
     * unused, p.Nq and p.Nk are the longest lengths (max_seqlen), total_q and total_k the rows of
     * the packed tensors, and lse is (Hq, total_q). cu_seqlens are int32, B + 1 entries, host memory
     * for the CPU backend, device memory for CUDA. key_mask and mask do not apply to varlen calls. */
    const int32_t *cu_seqlens_q, *cu_seqlens_k;
    int64_t total_q, total_k;
} fa_variants;

typedef enum {
    FA_ALIGN_TOP_LEFT = 0,       /* δ = 0, as SDPA's is_causal */
    FA_ALIGN_BOTTOM_RIGHT = 1,   /* δ = Nk − Nq: the queries are the last Nq tokens of the sequence */
} fa_align;

typedef enum {
    FA_MASK_NONE = 0,
    FA_MASK_BOOL = 1,            /* bytes, nonzero: the pair takes part */
    FA_MASK_ADD = 2,             /* added to the scores, in the dtype of q */
    FA_MASK_ADD_F32 = 3,         /* added to the scores, fp32 */
} fa_mask_kind;

/* Nonzero when v (NULL: none) asks for any variant. */
int fa_has_variants(const fa_variants *v);

/* fa_check_params for p beside v, then v's own fields (FA_ERR_VARIANT, FA_ERR_NULL_POINTER). Host
 * cu_seqlens are not read here (the CPU backend checks them: FA_ERR_CU_SEQLENS). */
int fa_check_variants(const fa_params *p, const fa_variants *v);

/* A short English description of a status; never NULL. */
const char *fa_strerror(int status);

/* After FA_ERR_CUDA: the failed CUDA call's error name and text ("cudaErrorInvalidValue: invalid
 * argument"), as last recorded on this thread; "" when none was. */
const char *fa_last_cuda_error(void);

/* Choices the backends make automatically, forced for tests and tuning tools. Zero in a field
 * is the automatic choice (the default: nothing forces anything until fa_set_overrides is called).
 * A forced family that cannot run a problem answers FA_ERR_UNSUPPORTED rather than running another.
 * docs/tuning.md says what each automatic rule picks and why. */
typedef enum {
    FA_FAMILY_AUTO = 0,      /* the fastest family that runs the problem */
    FA_FAMILY_SM90,          /* Hopper tensor cores (wgmma, TMA): fp16/bf16, compute capability 9.0 */
    FA_FAMILY_SM80,          /* tensor cores (mma.sync): fp16/bf16, sm_80+ */
    FA_FAMILY_FP32TC,        /* fp32 on tensor cores, three TF32 products per product: sm_80+, d <= 128 */
    FA_FAMILY_FP32,          /* fp32 on CUDA cores (FFMA) */
    FA_FAMILY_SIMT,          /* CUDA cores, every dtype (also the decode kernel for fp16/bf16) */
    FA_FAMILY_TURING,        /* Turing tensor cores (mma.sync m16n8k8): fp16, sm_75+ (compute_75 PTX
                                on newer GPUs) */
    FA_NUM_FAMILIES
} fa_family;

typedef struct {
    int family;              /* fa_family */
    int sm90_grid;           /* 1: one CTA per tile, 2: persistent (a CTA per SM walking the tiles),
                                3: persistent, a causal call's tiles taken in pairs, each head's
                                i-th heaviest with its i-th lightest, 4: a variant call without
                                key_mask or attn_mask on the packed sequences' walk, its tiles
                                from a counter (other calls: persistent) */
    int sm90_tail;           /* persistent grid's last round: 1 no split, 2..4 key parts (d = 128
                                three-consumer tile only, the one the automatic rule splits) */
    int decode_splits;       /* split-KV: n > 0 splits (each chunk keeps at least 64 keys) */
    int decode_warps;        /* d in (64, 128]: 4 or 8 warps per CTA (8 needs sm_90's shared memory) */
    int decode_stages;       /* d in (64, 128]: 2 or 3 stages per warp */
    int decode_cluster;      /* sm_90: 1 never merge splits in a cluster, 2 wherever 2..8 splits fit */
    int decode_evict;        /* 1 off, 2 on: K/V streamed with an L2 evict-first policy */
    int decode_combine;      /* 1 one thread per element, 2 four warps per row */
    int device_cc;           /* tests: plan as if the GPU's compute capability were this (major · 10
                                + minor: 70, 72, 75, 80, 86, 87, 88 or 89), lower than its own, with
                                that GPU's opt-in shared memory, so a newer GPU runs an older one's
                                choice of kernels */
    int split_kv;            /* attention calls on the split-KV kernel (decode.cu): 1 never, 2 wherever
                                it runs the call (the automatic rule: plan.h) */
    int sm90_heads;          /* causal Hopper calls: tiles walked in sections of n heads, rank by rank
                                (n > 0: the largest divisor of B · Hq up to n; 1: head by head; on
                                the packed walk, a divisor of Hq within each sequence) */
    int sm90_long_tile;      /* non-causal Hopper calls at d <= 128: 1 never, 2 always on the
                                three-consumer 80-key tile (automatic: from FA_SM90_LONG_NK keys) */
    int sm90_short_tile;     /* Hopper calls at d <= 64 but attn_mask's: 1 never, 2 always on the
                                two-consumer 128-row tile (automatic: short causal calls, sm90.cu) */
    int cpu_lanes;           /* C backend: 1 its 8-float forms, 2 its 16-float forms, whatever the CPU
                                has (automatic: 16 with AVX-512; the two give the same bits, and on
                                other CPUs GCC runs the 16-float forms lane by lane, slowly) */
} fa_overrides;

/* Private to tests and tuning tools: sets the process-wide overrides (every later call reads them;
 * not synchronised with calls running on other threads). FA_ERR_OVERRIDE for a field out of range,
 * FA_ERR_KERNEL_CHOICE for an unknown family; nothing changes then. NULL resets to automatic. */
int fa_set_overrides(const fa_overrides *o);
void fa_get_overrides(fa_overrides *o);

/* Checks the parameters that every backend shares. FA_OK when valid. */
int fa_check_params(const fa_params *p);

/* C backend (OpenMP over batch × heads × query blocks). */
int fa_forward_cpu(const fa_params *p);

/* With the variants of v (NULL: none): the C backend runs every one. The CUDA backend runs them
 * in fp16/bf16 on sm_80 and later (the Hopper kernel on compute capability 9.0);
 * fa_forward_variants_cuda answers FA_ERR_UNSUPPORTED for the rest (fp32, older devices, another
 * family forced), which the torch binding computes exactly through PyTorch.
 * CUDA never reads cu_seqlens on the host: packed sequences that break the rules above make the
 * whole output and lse NaN. */
int fa_forward_variants_cpu(const fa_params *p, const fa_variants *v);
struct CUstream_st;
int fa_forward_variants_cuda(const fa_params *p, const fa_variants *v, struct CUstream_st *stream);
/* The same with a device scratch buffer of scratch_bytes (NULL when 0), at least what
 * fa_forward_variants_scratch_bytes says: a call with few queries per KV head (a padded batch's
 * decoding step) runs the split-KV kernel, which merges its splits there; with less it runs on the
 * forward kernels, the same result up to rounding. Packed sequences on compute capability 9.0 keep
 * the Hopper kernel's tile counter there (4 bytes): its CTAs then take the sequences' query tiles
 * as they come free; with less each CTA walks a fixed share (the same bits, slower where the
 * tiles' costs differ). Sinks alone there use it as fa_forward_cuda_scratch does (a split last
 * round; with less, those tiles run whole). The size depends on the shapes and the current device only. v NULL (or
 * without any variant): fa_forward_scratch_bytes and fa_forward_cuda_scratch. */
int fa_forward_variants_scratch_bytes(const fa_params *p, const fa_variants *v, size_t *bytes);
int fa_forward_variants_cuda_scratch(const fa_params *p, const fa_variants *v, void *scratch, size_t scratch_bytes,
                                     struct CUstream_st *stream);

/* CUDA backend. stream is a cudaStream_t (struct CUstream_st * is its
 * definition in the CUDA headers; naming the struct keeps this header free of
 * them); NULL is the legacy default stream. Pointers are device pointers.
 * Returns FA_ERR_NO_CUDA when the library was built without CUDA.
 * Asynchronous: a kernel fault surfaces at the next synchronizing call. */
struct CUstream_st;
int fa_forward_cuda(const fa_params *p, struct CUstream_st *stream);

/* fa_forward_cuda with a device scratch buffer of scratch_bytes (NULL when 0), at least what
 * fa_forward_scratch_bytes says: on compute capability 9.0 the Hopper kernel splits the tiles of
 * its grid's last, partly filled round along the keys and merges them through it, and long causal
 * calls at 64 < d <= 128 (rows that see more than 4096 keys) keep a tile counter there (4 bytes),
 * their CTAs taking the query tiles as they come free. Less scratch (or fa_forward_cuda) runs
 * those tiles whole and those causal calls on the plain grids, with the same result up to rounding.
 * The size depends on the shapes and the current device only. */
int fa_forward_scratch_bytes(const fa_params *p, size_t *bytes);
int fa_forward_cuda_scratch(const fa_params *p, void *scratch, size_t scratch_bytes, struct CUstream_st *stream);

/* The backward pass: dQ, dK, dV (and the sinks' gradient) from the forward's q, k, v, its output o
 * and lse, and dO (and dlse when the caller's loss uses lse). P is recomputed from lse (no Nq×Nk
 * buffer; without delta the C backend takes each row's lse from its own scores, the same value
 * without the forward's rounding); D = rowsum(dO ∘ O); dS = P ∘ (dP − D + dlse) through the
 * softcap's derivative; dK and dV of a kv head sum over the query heads of its group. The same variants as the forward, packed
 * sequences included (dq, dk, dv rows outside every sequence are not written; lse and dlse are
 * (Hq, total_q) then); a float mask and ALiBi slopes get no gradient. */
typedef struct {
    fa_params p;                     /* q, k, v, o (the forward's output), lse (required), sizes, scale,
                                        causal, dtype */
    const void *dout;                /* (B, Hq, Nq, d), q's dtype */
    int64_t do_batch_stride, do_head_stride, do_row_stride;
    const float *dlse;               /* (B, Hq, Nq) contiguous; NULL: zero */
    const float *delta;              /* (B, Hq, Nq) contiguous: D given (rowsum(dO ∘ O) of the whole
                                        row, when k and v hold only some of its keys, as in ring
                                        attention); NULL: D = Σ_j P dP over these keys */
    void *dq, *dk, *dv;              /* q's, k's and v's shapes, q's dtype */
    int64_t dq_batch_stride, dq_head_stride, dq_row_stride;
    int64_t dk_batch_stride, dk_head_stride, dk_row_stride;
    int64_t dv_batch_stride, dv_head_stride, dv_row_stride;
    float *dsinks;                   /* (Hq), written when the variants have sinks; else unused */
} fa_backward_params;

/* C backend of the backward pass (OpenMP over batch × kv heads). */
int fa_backward_cpu(const fa_backward_params *bp, const fa_variants *v);

/* CUDA backend of the backward pass: the tensor-core kernels (fp16 and bf16 on compute capability
 * 8.0 and later, d <= 128; every variant but a mask tensor, packed sequences included) under the automatic
 * choice: on 9.0 the Hopper kernel where it takes the call (no softcap, ALiBi, key_mask or packed
 * sequences; 16-byte aligned rows), else the sm_80 one. fa_overrides.family sm80 forces the sm_80
 * kernel, sm90 the Hopper one alone. Everything else answers FA_ERR_UNSUPPORTED (the caller computes
 * it another way), also Hq, Nq or Nk = 0 (gradients of zeros); B, Hkv or both Nq and Nk = 0 leave
 * nothing to write: FA_OK, no workspace. workspace: device memory of at least what
 * fa_backward_workspace_bytes says (the dQ accumulator, fp32, and two floats per query row; its
 * contents on entry are unused), else FA_ERR_SCRATCH. dsinks, when sinks are given, is overwritten.
 * dq, dk, dv must not overlap the inputs. Asynchronous, as fa_forward_cuda. */
int fa_backward_workspace_bytes(const fa_backward_params *bp, const fa_variants *v, size_t *bytes);
int fa_backward_cuda(const fa_backward_params *bp, const fa_variants *v, void *workspace, size_t workspace_bytes,
                     struct CUstream_st *stream);

/* Attention over a KV cache (decoding, chunked prefill). The caches are p.k and
 * p.v, (B, Hkv, Nmax, d) with p.Nk = Nmax; sequence b holds cache_seqlens[b]
 * valid keys. When k_new / v_new are given, their Nnew rows are first written
 * into the caches in place at rows cache_seqlens[b] .. + Nnew, and attention
 * then covers L_b = cache_seqlens[b] + Nnew keys. With fa_variants (CPU; CUDA fp16/bf16): window,
 * softcap, ALiBi and sinks apply with δ = L_b − Nq (align is ignored); key_mask, mask and varlen do not apply
 * (FA_ERR_VARIANT). causal is bottom-right
 * aligned here: query i of Nq sees keys j <= L_b − Nq + i. A query that sees
 * no key (L_b = 0, or L_b < Nq when causal) gets O = 0 and lse = −inf. */
typedef struct {
    fa_params p;                     /* q, o, lse, scale, causal, dtype; k, v: the caches */
    const int32_t *cache_seqlens;    /* (B), host (CPU backend) or device (CUDA); NULL: Nmax − Nnew */
    const void *k_new, *v_new;       /* (B, Hkv, Nnew, d) or both NULL */
    int64_t kn_batch_stride, kn_head_stride, kn_row_stride;
    int64_t vn_batch_stride, vn_head_stride, vn_row_stride;
    int64_t Nnew;
} fa_kvcache_params;

/* The checks both kvcache backends share (fa_check_params, Nnew, k_new / v_new, their strides);
 * cache_seqlens itself is read by the backend. FA_OK when valid. */
int fa_check_kvcache_params(const fa_kvcache_params *kp);
/* A KV-cache call's variants as both backends take them (v_in NULL: none): copied into *v with the
 * queries bottom-right and checked; key_mask, mask and packed sequences are FA_ERR_VARIANT. */
int fa_kvcache_variants(const fa_kvcache_params *kp, const fa_variants *v_in, fa_variants *v);

int fa_forward_kvcache_cpu(const fa_kvcache_params *kp);
int fa_forward_kvcache_variants_cpu(const fa_kvcache_params *kp, const fa_variants *v);

/* CUDA backend (decode.cu, split-KV "flash-decoding"). Pointers are device pointers, including
 * cache_seqlens. It never reads cache_seqlens on the host (no synchronisation, CUDA-graph
 * capturable), so it cannot return FA_ERR_SEQLEN for a bad entry: when any cache_seqlens[b] + Nnew
 * lies outside 0..Nmax, the caches are left untouched and every output element (and lse) is NaN.
 * scratch: a device buffer of at least scratch_bytes >= *bytes from fa_kvcache_scratch_bytes (the
 * split count depends on the shapes and the current device only); NULL when that is 0. */
int fa_kvcache_scratch_bytes(const fa_kvcache_params *kp, size_t *bytes);
int fa_forward_kvcache_cuda(const fa_kvcache_params *kp, void *scratch, size_t scratch_bytes,
                            struct CUstream_st *stream);
/* The same with fa_variants (window, softcap, ALiBi, sinks, as fa_forward_kvcache_variants_cpu),
 * fp16 and bf16 on the tensor-core kernels of sm_80+; FA_ERR_UNSUPPORTED elsewhere (fp32, or the
 * simt family forced), and its scratch from fa_kvcache_variants_scratch_bytes. */
int fa_kvcache_variants_scratch_bytes(const fa_kvcache_params *kp, const fa_variants *v, size_t *bytes);
int fa_forward_kvcache_variants_cuda(const fa_kvcache_params *kp, const fa_variants *v, void *scratch,
                                     size_t scratch_bytes, struct CUstream_st *stream);

/* The benchmarks' baseline, not FlashAttention: three plain CUDA kernels
 * (S = Q Kᵀ · scale, row softmax, O = P V) that store the (B, Hq, Nq, Nk) fp32
 * score matrix in scratch, a device buffer of fa_naive_scratch_bytes(p) bytes. */
size_t fa_naive_scratch_bytes(const fa_params *p);
int fa_naive_forward(const fa_params *p, float *scratch, struct CUstream_st *stream);

#ifdef __cplusplus
}
#endif

#endif /* FA_H */
