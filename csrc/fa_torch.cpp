// fa_torch.cpp — the one file that touches torch: registers the fa:: ops.
//
//   fa::forward(Tensor q, Tensor k, Tensor v, float? scale=None, bool causal=False) -> Tensor
//   fa::forward_lse(...same...) -> (Tensor out, Tensor lse)
//   fa::naive_forward(...same...) -> Tensor        (CUDA only: the benchmark's N×N baseline)
//   fa::forward_variants(q, k, v, scale?, causal, align, window_left, window_right, softcap?,
//                        alibi_slopes?, sinks?, key_mask?, attn_mask?) -> (Tensor out, Tensor lse)
//   fa::forward_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, scale?,
//                      causal, align, window_left, window_right, softcap?, alibi_slopes?, sinks?)
//                                                   -> (Tensor out, Tensor lse)   (packed sequences)
//   fa::forward_kvcache(q, k_cache!, v_cache!, cache_seqlens?, k_new?, v_new?, scale?, causal,
//                       window_left, window_right, softcap?, alibi_slopes?, sinks?) -> Tensor
//                                                   (attention over a KV cache; CUDA: split-KV)
//   fa::backward(dout, q, k, v, out, lse, dlse?, ...forward_variants' arguments..., delta?)
//                -> (dq, dk, dv, dsinks)            (the gradients; torch_flashattn/_autograd.py)
//   fa::backward_varlen(dout, q, k, v, out, lse, dlse?, ...forward_varlen's arguments...)
//                -> (dq, dk, dv, dsinks)            (the gradients of forward_varlen)
//   fa::_set_exact(bool on) -> bool                  (tests: variant calls take the exact path)
//   fa::_exact_calls(bool reset=False) -> int        (calls the exact path computed)
//   fa::_set_overrides(int[] fields), fa::_get_overrides() -> int[]   (tests and tools: fa_overrides)
//
// Same semantics as F.scaled_dot_product_attention(q, k, v, is_causal=causal,
// scale=scale, enable_gqa=True), plus the variants of fa.h. This file validates the tensors
// (messages name the argument and what was expected), allocates the outputs, fills the fa_params
// and fa_variants structs of fa.h and calls the C backend (CPU) or the CUDA launcher on the current
// stream under a device guard. On CUDA, calls with variants that no kernel takes (fa_forward_variants_cuda
// answers FA_ERR_UNSUPPORTED: fp32, GPUs older than sm_80, a family forced that takes none) are computed exactly
// through PyTorch (exact_attention below, in fp32, no host synchronisation) and counted.
// Fake (meta) kernels live in torch_flashattn/_ops.py. In order (each section opens with a "// ----"
// line): checks and the params struct; the variants (checks, fa_variants, the exact paths
// exact_scores and exact_attention, fa::forward_variants); packed sequences (host cu_seqlens checks,
// their params, the exact path's padding, fa::forward_varlen); the plain forward ops; the backward
// (exact_backward, fa::backward, fa::backward_varlen); the KV cache (kvcache_call, then fa::forward_kvcache's
// version bump); overrides; registration, with tangent_guard (forward-mode AD raises at ADInplaceOrView).
#include <Python.h>

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/forward_grad.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/library.h>

#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <optional>
#include <tuple>
#include <vector>

#ifdef FA_WITH_CUDA
#include <cuda_runtime_api.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "fa.h"
#include "fa_internal.h"

namespace {

// Error messages are formatted with vsnprintf and handed to TORCH_CHECK as one
// string, so this library runs no iostream code of its own: with a toolchain
// that links libstdc++ statically, c10::str's ostringstream crashed beside
// libtorch's shared libstdc++ (seen on the H200 build machine).
__attribute__((format(printf, 1, 2))) std::string format(const char *fmt, ...)
{
    char buf[512];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, args);
    va_end(args);
    return buf;
}

#define FA_CHECK(cond, ...) TORCH_CHECK(cond, format(__VA_ARGS__))

std::string shape(const at::Tensor &t)
{
    std::string s = "(";
    for (int64_t i = 0; i < t.dim(); i++)
        s += (i ? ", " : "") + std::to_string(t.size(i));
    return s + ")";
}

fa_dtype to_fa_dtype(at::ScalarType t)
{
    switch (t) {
    case at::kFloat: return FA_FLOAT32;
    case at::kHalf: return FA_FLOAT16;
    default: return FA_BFLOAT16;  // the only other dtype check_inputs lets through
    }
}

// How an op's tensors are named in its errors: k and v's argument names, and the tensors as the
// caller passed them, whose shapes the errors show (the packed ops check (1, H, total, d) views of
// their (total, H, d) tensors; null: the checked tensors).
struct ArgNames {
    const char *k = "k", *v = "v";
    const at::Tensor *q = nullptr, *k_in = nullptr, *v_in = nullptr;
};

// Every check raises a RuntimeError naming the argument and the expectation.
void check_inputs(const char *op, const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
                  std::optional<double> scale, const ArgNames &names = {})
{
    const char *kn = names.k, *vn = names.v;
    const std::pair<const char *, const at::Tensor *> args[] = {{"q", &q}, {kn, &k}, {vn, &v}};
    for (const auto &[name, t] : args)
        FA_CHECK(t->dim() == 4, "%s: %s must be a 4-D tensor (B, H, N, d), got %d-D with shape %s", op, name,
                 (int)t->dim(), shape(*t).c_str());
    for (const auto &[name, t] : args) {
        FA_CHECK(t->device() == q.device(), "%s: q, %s and %s must be on the same device, got q on %s and %s on %s",
                 op, kn, vn, q.device().str().c_str(), name, t->device().str().c_str());
        FA_CHECK(t->scalar_type() == q.scalar_type(), "%s: q, %s and %s must have the same dtype, got q %s and %s %s",
                 op, kn, vn, c10::toString(q.scalar_type()), name, c10::toString(t->scalar_type()));
    }
    const auto dt = q.scalar_type();
    FA_CHECK(dt == at::kFloat || dt == at::kHalf || dt == at::kBFloat16,
             "%s: q, %s and %s must be float32, float16 or bfloat16, got %s", op, kn, vn, c10::toString(dt));
    FA_CHECK(q.device().is_cpu() || q.device().is_cuda(), "%s: q, %s and %s must be CPU or CUDA tensors, got %s", op,
             kn, vn, q.device().str().c_str());

    // Built only when a check fails (TORCH_CHECK formats its message then).
    const auto shapes = [&] {
        return "q " + shape(names.q ? *names.q : q) + ", " + kn + " " + shape(names.k_in ? *names.k_in : k) + ", "
               + vn + " " + shape(names.v_in ? *names.v_in : v);
    };
    for (const auto &[name, t] : args)              // reachable through stride-0 (expanded) views
        for (int i = 0; i < 3; i++)
            FA_CHECK(t->size(i) <= FA_MAX_SIZE, "%s: %s's %s = %lld is past the largest size taken, 2^40, got %s", op,
                     name, i == 0 ? "B" : i == 1 ? "H" : "N", (long long)t->size(i), shapes().c_str());
    FA_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0), "%s: batch size B must match, got %s", op,
             shapes().c_str());
    FA_CHECK(k.size(3) == q.size(3) && v.size(3) == q.size(3), "%s: head dim d (last dimension) must match, got %s",
             op, shapes().c_str());
    FA_CHECK(v.size(2) == k.size(2), "%s: %s and %s must have the same number of keys N, got %s", op, kn, vn,
             shapes().c_str());
    FA_CHECK(v.size(1) == k.size(1), "%s: %s and %s must have the same number of heads Hkv, got %s", op, kn, vn,
             shapes().c_str());
    const int64_t Hq = q.size(1), Hkv = k.size(1), d = q.size(3);
    FA_CHECK(Hq == 0 || (Hkv >= 1 && Hq % Hkv == 0),
             "%s: the number of query heads Hq = %lld must be a multiple of the number of key/value heads Hkv = %lld, "
             "got %s", op, (long long)Hq, (long long)Hkv, shapes().c_str());
    FA_CHECK(d >= 1 && d <= FA_MAX_HEAD_DIM, "%s: head dim d must be in 1..%d, got %lld", op, FA_MAX_HEAD_DIM,
             (long long)d);
    FA_CHECK(!scale.has_value() || (std::isfinite(*scale) && std::fabs(*scale) <= FA_MAX_SCALE),
             "%s: scale must be a finite number of magnitude at most %g, got %g", op, (double)FA_MAX_SCALE,
             scale.value_or(0.0));
}

// The kernels need the last dimension contiguous; batch/head/row strides are free.
at::Tensor last_dim_contiguous(const at::Tensor &t)
{
    return t.stride(3) == 1 || t.size(3) == 1 ? t : t.contiguous();
}

// One call's tensors and the params struct that points into them.
struct Call {
    at::Tensor q, k, v, o, lse;
    fa_params p;
};

Call prepare(const char *op, const at::Tensor &q_in, const at::Tensor &k_in, const at::Tensor &v_in,
             std::optional<double> scale, bool causal, bool want_lse)
{
    check_inputs(op, q_in, k_in, v_in, scale);
    Call c;
    c.q = last_dim_contiguous(q_in);
    c.k = last_dim_contiguous(k_in);
    c.v = last_dim_contiguous(v_in);
    const at::Tensor &q = c.q, &k = c.k, &v = c.v;
    const int64_t B = q.size(0), Hq = q.size(1), Nq = q.size(2), d = q.size(3);
    c.o = at::empty({B, Hq, Nq, d}, q.options());
    if (want_lse)
        c.lse = at::empty({B, Hq, Nq}, q.options().dtype(at::kFloat));

    fa_params &p = c.p;
    std::memset(&p, 0, sizeof(p));
    p.q = q.data_ptr();
    p.k = k.data_ptr();
    p.v = v.data_ptr();
    p.o = c.o.data_ptr();
    p.lse = want_lse ? c.lse.data_ptr<float>() : nullptr;
    p.q_batch_stride = q.stride(0); p.q_head_stride = q.stride(1); p.q_row_stride = q.stride(2);
    p.k_batch_stride = k.stride(0); p.k_head_stride = k.stride(1); p.k_row_stride = k.stride(2);
    p.v_batch_stride = v.stride(0); p.v_head_stride = v.stride(1); p.v_row_stride = v.stride(2);
    p.o_batch_stride = c.o.stride(0); p.o_head_stride = c.o.stride(1); p.o_row_stride = c.o.stride(2);
    p.B = B; p.Hq = Hq; p.Hkv = k.size(1); p.Nq = Nq; p.Nk = k.size(2); p.d = d;
    p.scale = static_cast<float>(scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(d)));
    p.causal = causal ? 1 : 0;
    p.dtype = to_fa_dtype(q.scalar_type());
    p.num_threads = at::get_num_threads();
    return c;
}

// Raises for a failed call: the status's text and, for a CUDA failure, the CUDA error's name and text.
void check_status(const char *op, int status)
{
    if (status == FA_OK)
        return;
    if (status == FA_ERR_CUDA)
        FA_CHECK(false, "%s: %s (%s)", op, fa_strerror(status), fa_last_cuda_error());
    FA_CHECK(false, "%s: %s (status %d)", op, fa_strerror(status), status);
}

// ---- Variants -------------------------------------------------------------------------------

// The variant arguments of one call, checked, with the tensors fa_params will point into.
struct Variants {
    int align = FA_ALIGN_TOP_LEFT;
    int64_t window_left = -1, window_right = -1;
    double softcap = 0.0;                       // 0: none
    at::Tensor alibi;                           // (B, Hq) or (Hq) fp32, contiguous
    at::Tensor sinks;                           // (Hq) fp32, contiguous
    at::Tensor key_mask;                        // (B, Nk) bool, contiguous rows (any batch stride)
    at::Tensor mask;                            // expanded to (B, Hq, Nq, Nk): strides, no copy
    bool any() const
    {
        return align != FA_ALIGN_TOP_LEFT || window_left >= 0 || window_right >= 0 || softcap != 0.0 ||
               alibi.defined() || sinks.defined() || key_mask.defined() || mask.defined();
    }
};

const char *dtype_name(const at::Tensor &t) { return c10::toString(t.scalar_type()); }

// Host values past FA_MAX_SCALE: × log2 e leaves a float in the kernels (NaN rows). A sink of −inf
// is no sink. Returns the first such value's index, or −1.
int64_t first_past_float(const at::Tensor &t, bool minus_inf_ok)
{
    const float *x = t.data_ptr<float>();
    for (int64_t i = 0; i < t.numel(); i++)
        if (std::fabs(x[i]) > FA_MAX_SCALE && !(minus_inf_ok && x[i] == -INFINITY))
            return i;
    return -1;
}

// Checks every variant argument against the problem's sizes (B sequences, Hq heads, Nq × Nk), the
// scale (scale / softcap), and device. Nothing reads device memory: the values of ALiBi slopes and
// sinks are checked on the CPU only.
Variants check_variants(const char *op, const at::Tensor &q, std::optional<double> scale, int64_t B, int64_t Hq,
                        int64_t Nq, int64_t Nk, int64_t align, int64_t window_left, int64_t window_right,
                        std::optional<double> softcap,
                        const std::optional<at::Tensor> &alibi_slopes, const std::optional<at::Tensor> &sinks,
                        const std::optional<at::Tensor> &key_mask, const std::optional<at::Tensor> &attn_mask)
{
    Variants va;
    FA_CHECK(align == FA_ALIGN_TOP_LEFT || align == FA_ALIGN_BOTTOM_RIGHT,
             "%s: causal_align must be 0 (top_left) or 1 (bottom_right), got %lld", op, (long long)align);
    FA_CHECK(window_left >= -1 && window_right >= -1,
             "%s: window entries must be -1 (unbounded) or >= 0, got (%lld, %lld)", op, (long long)window_left,
             (long long)window_right);
    va.align = (int)align;
    va.window_left = window_left;
    va.window_right = window_right;
    if (softcap.has_value()) {
        // The kernels take it as a float, a normal one: its reciprocal must be a float too (the C
        // backend's tanh takes the scores times 1 / softcap).
        FA_CHECK(std::isfinite(*softcap) && static_cast<float>(*softcap) >= FLT_MIN && *softcap <= FA_MAX_SCALE,
                 "%s: softcap must be a number in [%g, %g] (a normal float), got %g", op, (double)FLT_MIN,
                 (double)FA_MAX_SCALE, *softcap);
        // The kernels take the scores times scale / softcap into the tanh: that too must stay a float,
        // a normal one unless the scale is 0 (a subnormal ratio keeps a few bits of the scale, or none).
        const double d = static_cast<double>(q.size(-1));
        const float sc = static_cast<float>(scale.has_value() ? *scale : 1.0 / std::sqrt(d));
        const float ratio = std::fabs(sc) / static_cast<float>(*softcap);
        FA_CHECK(ratio <= FA_MAX_SCALE && (sc == 0.0f || ratio >= FLT_MIN),
                 "%s: |scale| / softcap must be 0 or in [%g, %g], got scale %g and softcap %g", op, (double)FLT_MIN,
                 (double)FA_MAX_SCALE, (double)sc, *softcap);
        va.softcap = *softcap;
    }
    if (alibi_slopes.has_value()) {
        const at::Tensor &a = *alibi_slopes;
        FA_CHECK(a.scalar_type() == at::kFloat && a.device() == q.device() &&
                     ((a.dim() == 1 && a.size(0) == Hq) || (a.dim() == 2 && a.size(0) == B && a.size(1) == Hq)),
                 "%s: alibi_slopes must be a float32 tensor of shape (Hq,) = (%lld,) or (B, Hq) = (%lld, %lld) on "
                 "%s, got %s %s on %s", op, (long long)Hq, (long long)B, (long long)Hq, q.device().str().c_str(),
                 dtype_name(a), shape(a).c_str(), a.device().str().c_str());
        va.alibi = a.contiguous();
        const int64_t i = va.alibi.is_cpu() ? first_past_float(va.alibi, false) : -1;
        FA_CHECK(i < 0, "%s: alibi_slopes must be of magnitude at most %g, got %g at flat index %lld", op,
                 (double)FA_MAX_SCALE, i < 0 ? 0.0 : (double)va.alibi.data_ptr<float>()[i], (long long)i);
    }
    if (sinks.has_value()) {
        const at::Tensor &t = *sinks;
        FA_CHECK(t.scalar_type() == at::kFloat && t.device() == q.device() && t.dim() == 1 && t.size(0) == Hq,
                 "%s: sinks must be a float32 tensor of shape (Hq,) = (%lld,) on %s, got %s %s on %s", op,
                 (long long)Hq, q.device().str().c_str(), dtype_name(t), shape(t).c_str(), t.device().str().c_str());
        va.sinks = t.contiguous();
        const int64_t i = va.sinks.is_cpu() ? first_past_float(va.sinks, true) : -1;
        FA_CHECK(i < 0, "%s: sinks must be -inf or of magnitude at most %g, got %g at head %lld", op,
                 (double)FA_MAX_SCALE, i < 0 ? 0.0 : (double)va.sinks.data_ptr<float>()[i], (long long)i);
    }
    if (key_mask.has_value()) {
        const at::Tensor &m = *key_mask;
        FA_CHECK(m.dim() == 2 && m.size(0) == B && m.size(1) == Nk && m.device() == q.device() &&
                     (m.scalar_type() == at::kBool || at::isIntegralType(m.scalar_type(), false)),
                 "%s: key_mask must be a bool or integer tensor of shape (B, Nk) = (%lld, %lld) on %s, got %s %s "
                 "on %s", op, (long long)B, (long long)Nk, q.device().str().c_str(), dtype_name(m),
                 shape(m).c_str(), m.device().str().c_str());
        // Rows at any batch stride (a column slice of a longer padding mask is not copied).
        const at::Tensor mb = m.scalar_type() == at::kBool ? m : m.ne(0);
        va.key_mask = mb.stride(1) == 1 || Nk <= 1 ? mb : mb.contiguous();
    }
    if (attn_mask.has_value()) {
        const at::Tensor &m = *attn_mask;
        FA_CHECK(m.device() == q.device(), "%s: attn_mask must be on q's device %s, got %s", op,
                 q.device().str().c_str(), m.device().str().c_str());
        FA_CHECK(m.scalar_type() == at::kBool || m.scalar_type() == q.scalar_type() || m.scalar_type() == at::kFloat,
                 "%s: attn_mask must be bool, float32 or q's dtype %s, got %s", op, dtype_name(q), dtype_name(m));
        const int64_t target[4] = {B, Hq, Nq, Nk};
        bool ok = m.dim() <= 4;
        for (int64_t i = 0; ok && i < m.dim(); i++) {
            const int64_t size = m.size(m.dim() - 1 - i), want = target[3 - i];
            ok = size == want || size == 1;
        }
        FA_CHECK(ok, "%s: attn_mask of shape %s does not broadcast to (B, Hq, Nq, Nk) = (%lld, %lld, %lld, %lld)",
                 op, shape(m).c_str(), (long long)B, (long long)Hq, (long long)Nq, (long long)Nk);
        va.mask = m.expand({B, Hq, Nq, Nk});
    }
    return va;
}

// fa.h's fa_variants pointing into va's tensors.
fa_variants to_fa_variants(const Variants &va, at::ScalarType q_dtype)
{
    fa_variants p;
    std::memset(&p, 0, sizeof(p));
    p.align = va.align;
    p.window = va.window_left >= 0 || va.window_right >= 0;
    p.window_left = va.window_left;
    p.window_right = va.window_right;
    p.softcap = static_cast<float>(va.softcap);
    if (va.alibi.defined()) {
        p.alibi_slopes = va.alibi.data_ptr<float>();
        p.alibi_batch_stride = va.alibi.dim() == 2 ? va.alibi.stride(0) : 0;
    }
    if (va.sinks.defined())
        p.sinks = va.sinks.data_ptr<float>();
    if (va.key_mask.defined()) {
        p.key_mask = static_cast<const uint8_t *>(va.key_mask.data_ptr());
        p.key_mask_batch_stride = va.key_mask.stride(0);
    }
    if (va.mask.defined() && va.mask.numel() > 0) {   // an empty one (B, Hq, Nq or Nk = 0) has nothing to add
        const at::Tensor &m = va.mask;
        p.mask = m.data_ptr();
        p.mask_kind = m.scalar_type() == at::kBool ? FA_MASK_BOOL
                    : m.scalar_type() == at::kFloat && q_dtype != at::kFloat ? FA_MASK_ADD_F32 : FA_MASK_ADD;
        p.mask_batch_stride = m.stride(0); p.mask_head_stride = m.stride(1);
        p.mask_row_stride = m.stride(2); p.mask_col_stride = m.stride(3);
    }
    return p;
}

// Calls the exact path computed (torch_flashattn.stats()["exact"]).
std::atomic<int64_t> g_exact_calls{0};

// Tests (torch_flashattn._testing.exact_path): calls with variants take the exact path, on the CPU
// (so its code runs where no GPU is) and on CUDA (instead of the kernels that take them).
std::atomic<bool> g_force_exact{false};

bool set_exact(bool on)
{
    return g_force_exact.exchange(on);
}

// One block of query rows' scores in fp32 (rows r0 .. r0 + rc; i_delta = i + δ per row, (B|1, 1,
// rc, 1)) with softcap, ALiBi and a float mask applied, and which pairs are visible (window,
// causal, k_len, key_mask, a bool mask). *tanh_out: tanh(s / softcap), for the backward's
// derivative. The exact paths' shared step, written from fa.h's semantics.
at::Tensor exact_scores(const at::Tensor &qc, const at::Tensor &k32, double scale, bool causal, const Variants &va,
                        const at::Tensor &i_delta, const at::Tensor &k_len, int64_t r0, at::Tensor *visible,
                        at::Tensor *tanh_out)
{
    const int64_t B = qc.size(0), Hq = qc.size(1), rc = qc.size(2), d = qc.size(3);
    const int64_t Hkv = k32.size(1), Nk = k32.size(2), G = Hkv > 0 ? Hq / Hkv : 1;
    const at::Tensor j = at::arange(Nk, qc.options().dtype(at::kLong)).view({1, 1, 1, Nk});
    // (B, Hkv, G·rc, d) · (B, Hkv, d, Nk): the G query heads of a kv head together.
    at::Tensor sc = at::matmul(qc.reshape({B, Hkv, G * rc, d}), k32.transpose(2, 3)).view({B, Hq, rc, Nk}) * scale;
    if (va.softcap != 0.0) {
        const at::Tensor t = at::tanh(sc / va.softcap);
        sc = t * va.softcap;
        if (tanh_out != nullptr)
            *tanh_out = t;
    }
    if (va.alibi.defined()) {
        const at::Tensor slope = (va.alibi.dim() == 2 ? va.alibi : va.alibi.view({1, Hq}).expand({B, Hq}))
                                     .view({B, Hq, 1, 1});
        sc = sc - slope * (i_delta - j).abs().to(at::kFloat);
    }
    if (va.mask.defined() && va.mask.scalar_type() != at::kBool)
        sc = sc + va.mask.narrow(2, r0, rc).to(at::kFloat);
    // A side of 2^62 or more reaches past every row and key (|i + δ| and Nk are tensor sizes), and
    // i + δ ± side must not wrap past int64: such sides are taken as 2^62.
    const int64_t far = int64_t(1) << 62;
    const int64_t left = std::min(va.window_left, far), right = causal ? 0 : std::min(va.window_right, far);
    at::Tensor vis = at::ones({1, 1, 1, 1}, qc.options().dtype(at::kBool));
    if (left >= 0)
        vis = vis & (j >= i_delta - left);
    if (right >= 0)
        vis = vis & (j <= i_delta + right);
    if (k_len.defined())
        vis = vis & (j < k_len.view({B, 1, 1, 1}));
    if (va.key_mask.defined())
        vis = vis & va.key_mask.ne(0).view({B, 1, 1, Nk});
    if (va.mask.defined() && va.mask.scalar_type() == at::kBool)
        vis = vis & va.mask.narrow(2, r0, rc);
    *visible = vis;
    return sc;
}

// The softmax of scores sv (B, Hq, rows, Nk), −inf where hidden, beside an optional sink (Hq,): P = e / Σe
// with e = exp(s − m), m the row's max (and the sink's; 0 for a row with neither), den = Σe (plus the
// sink's term), so lse = m + log den. Not exp(s − lse): lse cannot hold log Σe where |m| is huge (a
// float mask of −3.4e38 on a whole row, which SDPA averages).
struct Weights {
    at::Tensor P, m, den;
};

Weights softmax_weights(const at::Tensor &sv, const at::Tensor &sinks)
{
    at::Tensor m = std::get<0>(sv.max(3, true));
    const at::Tensor sink = sinks.defined() ? sinks.view({1, sv.size(1), 1, 1}).expand_as(m) : at::Tensor();
    if (sink.defined())
        m = at::maximum(m, sink);
    m = at::where(m.isneginf(), 0.0, m);
    const at::Tensor e = at::exp(sv - m);
    at::Tensor den = e.sum(3, true);
    if (sink.defined())
        den = den + at::exp(sink - m);
    return {at::where(den == 0, 0.0, e / den), m, den};
}

// The variants computed exactly through PyTorch, in fp32: scores, the visibility of each pair and
// the softmax written out from fa.h's semantics, a block of query rows at a time (at most 2^26
// scores in flight). q (B, Hq, Nq, d), k, v (B, Hkv, Nk, d). q_len, k_len (B,) int64 or undefined:
// each sequence's real lengths (rows past them are padding: keys invisible, rows discarded by the
// caller), which also set a bottom-right δ. No host synchronisation. Returns out in q's dtype and
// lse (B, Hq, Nq) fp32; a row with no visible key and no sink gets 0 and −inf.
std::tuple<at::Tensor, at::Tensor> exact_attention(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
                                                   double scale, bool causal, const Variants &va,
                                                   const at::Tensor &q_len, const at::Tensor &k_len)
{
    g_exact_calls++;
    const int64_t B = q.size(0), Hq = q.size(1), Nq = q.size(2), d = q.size(3), Hkv = k.size(1), Nk = k.size(2);
    const int64_t G = Hkv > 0 ? Hq / Hkv : 1;
    const auto f32 = q.options().dtype(at::kFloat), i64 = q.options().dtype(at::kLong);
    at::Tensor out = at::zeros({B, Hq, Nq, d}, f32);
    at::Tensor lse = at::full({B, Hq, Nq}, -INFINITY, f32);
    if (B == 0 || Hq == 0 || Nq == 0 || Nk == 0) {
        if (va.sinks.defined() && B * Hq * Nq > 0)
            lse.copy_(va.sinks.view({1, Hq, 1}).expand({B, Hq, Nq}));
        return {out.to(q.scalar_type()), lse};
    }
    const at::Tensor k32 = k.to(at::kFloat), v32 = v.to(at::kFloat);
    // δ per sequence: (B, 1, 1, 1).
    at::Tensor delta = at::zeros({B, 1, 1, 1}, i64);
    if (va.align == FA_ALIGN_BOTTOM_RIGHT) {
        const at::Tensor nq = q_len.defined() ? q_len : at::full({B}, Nq, i64);
        const at::Tensor nk = k_len.defined() ? k_len : at::full({B}, Nk, i64);
        delta = (nk - nq).view({B, 1, 1, 1});
    }
    const int64_t per_row = B * Hq * Nk;
    const int64_t rows = std::max<int64_t>(1, std::min<int64_t>(Nq, (int64_t(1) << 26) / std::max<int64_t>(per_row, 1)));
    for (int64_t r0 = 0; r0 < Nq; r0 += rows) {
        const int64_t rc = std::min(rows, Nq - r0);
        const at::Tensor qc = q.narrow(2, r0, rc).to(at::kFloat);
        const at::Tensor i = at::arange(r0, r0 + rc, i64).view({1, 1, rc, 1}) + delta;   // i + δ
        at::Tensor visible;
        at::Tensor sc = exact_scores(qc, k32, scale, causal, va, i, k_len, r0, &visible, nullptr);
        const Weights sw = softmax_weights(at::where(visible, sc, -INFINITY), va.sinks);
        const at::Tensor l = sw.m + at::log(sw.den), &w = sw.P;
        const at::Tensor oc = at::matmul(w.reshape({B, Hkv, G * rc, Nk}), v32).view({B, Hq, rc, d});
        out.narrow(2, r0, rc).copy_(oc);
        lse.narrow(2, r0, rc).copy_(l.squeeze(3));
    }
    return {out.to(q.scalar_type()), lse};
}

// Scratch for the split-KV routes, the Hopper kernel's split last round or its packed walk's counter,
// sized from the shapes and the device only (no synchronisation; a CUDA graph can capture the call),
// then the CUDA launcher.
// fv: the variants, or nullptr for plain attention (the launcher then runs fa_forward_cuda_scratch).
#ifdef FA_WITH_CUDA
int run_cuda(const fa_params &p, const fa_variants *fv, const at::Tensor &q)
{
    const c10::cuda::CUDAGuard guard(q.device());
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    size_t bytes = 0;
    int status = fa_forward_variants_scratch_bytes(&p, fv, &bytes);
    if (status == FA_OK) {
        const at::Tensor scratch = bytes ? at::empty({static_cast<int64_t>(bytes)}, q.options().dtype(at::kByte))
                                         : at::Tensor();
        status = fa_forward_variants_cuda_scratch(&p, fv, bytes ? scratch.data_ptr() : nullptr, bytes, stream);
    }
    return status;
}
#endif

std::tuple<at::Tensor, at::Tensor> forward_variants(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
                                                    std::optional<double> scale, bool causal, int64_t align,
                                                    int64_t window_left, int64_t window_right,
                                                    std::optional<double> softcap,
                                                    const std::optional<at::Tensor> &alibi_slopes,
                                                    const std::optional<at::Tensor> &sinks,
                                                    const std::optional<at::Tensor> &key_mask,
                                                    const std::optional<at::Tensor> &attn_mask)
{
    const char *op = "fa.forward_variants";
    const bool exact = g_force_exact.load();
    Call c = prepare(op, q, k, v, scale, causal, true);
    const Variants va = check_variants(op, q, scale, c.p.B, c.p.Hq, c.p.Nq, c.p.Nk, align, window_left, window_right,
                                       softcap, alibi_slopes, sinks, key_mask, attn_mask);
    const fa_variants fv = to_fa_variants(va, q.scalar_type());
    if (exact || c.q.is_cuda()) {
#ifdef FA_WITH_CUDA
        std::optional<c10::cuda::CUDAGuard> guard;
        if (c.q.is_cuda())
            guard.emplace(c.q.device());
        if (c.q.is_cuda() && !va.any()) {       // no variant: the kernels
            check_status(op, run_cuda(c.p, nullptr, c.q));
            return {c.o, c.lse};
        }
        if (c.q.is_cuda() && !exact) {          // the kernels that take variants, else the exact path
            const int status = run_cuda(c.p, &fv, c.q);
            if (status != FA_ERR_UNSUPPORTED) {
                check_status(op, status);
                return {c.o, c.lse};
            }
        }
#endif
        return exact_attention(c.q, c.k, c.v, c.p.scale, causal, va, at::Tensor(), at::Tensor());
    }
    check_status(op, fa_forward_variants_cpu(&c.p, &fv));
    return {c.o, c.lse};
}

// ---- Packed sequences ---------------------------------------------------------------------

// The checks every packed-sequence op makes on its arguments: q, k, v (total, H, d) with the shared
// checks on (1, H, total, d) views; cu_seqlens 1-D int32 of one length B + 1 on q's device;
// max_seqlen >= 0. Returns B.
int64_t check_packed_inputs(const char *op, const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
                            const at::Tensor &cu_q, const at::Tensor &cu_k, int64_t max_q, int64_t max_k,
                            std::optional<double> scale)
{
    const std::pair<const char *, const at::Tensor *> args[] = {{"q", &q}, {"k", &k}, {"v", &v}};
    for (const auto &[name, t] : args)
        FA_CHECK(t->dim() == 3, "%s: %s must be a 3-D tensor (total, H, d), got %d-D with shape %s", op, name,
                 (int)t->dim(), shape(*t).c_str());
    check_inputs(op, q.transpose(0, 1).unsqueeze(0), k.transpose(0, 1).unsqueeze(0), v.transpose(0, 1).unsqueeze(0),
                 scale, {"k", "v", &q, &k, &v});
    const std::pair<const char *, const at::Tensor *> cus[] = {{"cu_seqlens_q", &cu_q}, {"cu_seqlens_k", &cu_k}};
    for (const auto &[name, t] : cus)
        FA_CHECK(t->scalar_type() == at::kInt && t->dim() == 1 && t->size(0) >= 1 && t->device() == q.device(),
                 "%s: %s must be a 1-D int32 tensor of B + 1 offsets on %s, got %s %s on %s", op, name,
                 q.device().str().c_str(), dtype_name(*t), shape(*t).c_str(), t->device().str().c_str());
    FA_CHECK(cu_q.size(0) == cu_k.size(0), "%s: cu_seqlens_q and cu_seqlens_k must have the same length B + 1, got %lld "
             "and %lld", op, (long long)cu_q.size(0), (long long)cu_k.size(0));
    FA_CHECK(max_q >= 0 && max_k >= 0, "%s: max_seqlen_q and max_seqlen_k must be >= 0, got %lld and %lld", op,
             (long long)max_q, (long long)max_k);
    return cu_q.size(0) - 1;
}

// cu_seqlens read on the host (the CPU backend's tensors): fa.h's rules, each break naming its argument.
void check_host_cu_seqlens(const char *op, const at::Tensor &cq, const at::Tensor &ck, int64_t B, int64_t max_q,
                           int64_t max_k, int64_t total_q, int64_t total_k)
{
    for (const auto &[name, t, max_len, total] :
         {std::tuple<const char *, const at::Tensor *, int64_t, int64_t>{"cu_seqlens_q", &cq, max_q, total_q},
          std::tuple<const char *, const at::Tensor *, int64_t, int64_t>{"cu_seqlens_k", &ck, max_k, total_k}}) {
        const bool is_q = name == std::string("cu_seqlens_q");
        const int32_t *c = t->data_ptr<int32_t>();
        FA_CHECK(c[0] == 0, "%s: %s must start at 0, got %d", op, name, (int)c[0]);
        for (int64_t b = 0; b < B; b++) {
            FA_CHECK(c[b + 1] >= c[b], "%s: %s must not decrease, got %d after %d at index %lld", op, name,
                     (int)c[b + 1], (int)c[b], (long long)(b + 1));
            FA_CHECK(c[b + 1] - c[b] <= max_len, "%s: sequence %lld has length %d, more than the %s %lld given",
                     op, (long long)b, (int)(c[b + 1] - c[b]), is_q ? "max_seqlen_q" : "max_seqlen_k",
                     (long long)max_len);
        }
        FA_CHECK(c[B] <= total, "%s: %s ends at %d, past the %lld rows of %s", op, name, (int)c[B],
                 (long long)total, is_q ? "q" : "k and v");
    }
}

// No sequence is longer than its packed tensor (cu_seqlens end within its rows): a max_seqlen past
// that bounds nothing, and the rows bound it instead, so that it sizes no grid, loop or padding
// (2^40 kept the C backend looping over empty query tiles). Called after the host checks, whose
// messages name the max_seqlen given.
void clamp_max_seqlen(int64_t &max_q, int64_t &max_k, int64_t total_q, int64_t total_k)
{
    max_q = std::min(max_q, total_q);
    max_k = std::min(max_k, total_k);
}

// fa_params over packed q, k, v, o (total, H, d) and lse (Hq, total_q): B sequences of at most
// max_q queries and max_k keys (batch strides 0; fa_variants carries cu_seqlens).
fa_params packed_params(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, const at::Tensor &o,
                        const at::Tensor &lse, int64_t B, int64_t max_q, int64_t max_k, float scale, bool causal)
{
    fa_params p;
    std::memset(&p, 0, sizeof(p));
    p.q = q.data_ptr(); p.k = k.data_ptr(); p.v = v.data_ptr(); p.o = const_cast<void *>(o.data_ptr());
    p.lse = const_cast<float *>(lse.data_ptr<float>());
    p.q_head_stride = q.stride(1); p.q_row_stride = q.stride(0);
    p.k_head_stride = k.stride(1); p.k_row_stride = k.stride(0);
    p.v_head_stride = v.stride(1); p.v_row_stride = v.stride(0);
    p.o_head_stride = o.stride(1); p.o_row_stride = o.stride(0);
    p.B = B; p.Hq = q.size(1); p.Hkv = k.size(1); p.Nq = max_q; p.Nk = max_k; p.d = q.size(2);
    p.scale = scale;
    p.causal = causal ? 1 : 0;
    p.dtype = to_fa_dtype(q.scalar_type());
    p.num_threads = at::get_num_threads();
    return p;
}

// The exact paths' view of packed sequences: each padded to its max_seqlen by gathering rows
// (indices clamped: bad cu_seqlens read inside the tensors), and padded results scattered back. ok is
// whether cu_seqlens follow fa.h's rules, a device scalar never read on the host: results are NaN
// where it is false.
struct Padded {
    int64_t B, max_q, max_k, total_q, total_k;
    at::Tensor cq64, ck64, len_q, len_k, ok, iq, ik, real_q, real_k;   // iq, ik: (B·max); real_*: (B, max)

    Padded(const at::Tensor &cq, const at::Tensor &ck, int64_t B_, int64_t max_q_, int64_t max_k_, int64_t total_q_,
           int64_t total_k_)
        : B(B_), max_q(max_q_), max_k(max_k_), total_q(total_q_), total_k(total_k_)
    {
        const auto i64 = cq.options().dtype(at::kLong);
        cq64 = cq.to(at::kLong);
        ck64 = ck.to(at::kLong);
        len_q = cq64.narrow(0, 1, B) - cq64.narrow(0, 0, B);
        len_k = ck64.narrow(0, 1, B) - ck64.narrow(0, 0, B);
        ok = (cq64[0] == 0) & (ck64[0] == 0) & (cq64[B] <= total_q) & (ck64[B] <= total_k);
        if (B > 0)
            ok = ok & (len_q >= 0).all() & (len_k >= 0).all() & (len_q <= max_q).all() & (len_k <= max_k).all();
        const at::Tensor rq = at::arange(max_q, i64).view({1, max_q}), rk = at::arange(max_k, i64).view({1, max_k});
        iq = (cq64.narrow(0, 0, B).view({B, 1}) + rq).clamp(0, std::max<int64_t>(total_q - 1, 0)).reshape(-1);
        ik = (ck64.narrow(0, 0, B).view({B, 1}) + rk).clamp(0, std::max<int64_t>(total_k - 1, 0)).reshape(-1);
        real_q = rq < len_q.view({B, 1});
        real_k = rk < len_k.view({B, 1});
    }

    // (total, H, d) rows of q (is_q) or of k / v -> (B, H, max, d).
    at::Tensor rows(const at::Tensor &x, bool is_q) const
    {
        const int64_t n = is_q ? max_q : max_k;
        return x.numel() == 0 ? at::zeros({B, x.size(1), n, x.size(2)}, x.options())
                              : x.index_select(0, is_q ? iq : ik).view({B, n, x.size(1), x.size(2)}).transpose(1, 2);
    }

    // (Hq, total_q) -> (B, Hq, max_q), `pad` on the padding rows.
    at::Tensor lse(const at::Tensor &x, double pad) const
    {
        const int64_t Hq = x.size(0);
        const at::Tensor g = x.numel() == 0 ? at::zeros({Hq, B * max_q}, x.options()) : x.index_select(1, iq);
        return at::where(real_q.view({B, 1, max_q}), g.view({Hq, B, max_q}).permute({1, 0, 2}), pad);
    }

    // Where row (b, i) of the padding goes: q (or k) row cu[b] + i when it is real, else a spare row `total`.
    at::Tensor dst(bool is_q) const
    {
        const int64_t n = is_q ? max_q : max_k, total = is_q ? total_q : total_k;
        const at::Tensor &c64 = is_q ? cq64 : ck64;
        return at::where(is_q ? real_q : real_k,
                         c64.narrow(0, 0, B).view({B, 1}) + at::arange(n, c64.options()).view({1, n}), total)
            .clamp(0, total).reshape(-1);
    }

    // (B, H, max, d) -> (total, H, d): real rows back in place, rows outside every sequence `fill`.
    at::Tensor back(const at::Tensor &xp, bool is_q, double fill) const
    {
        const int64_t n = is_q ? max_q : max_k, total = is_q ? total_q : total_k, H = xp.size(1), d = xp.size(3);
        at::Tensor x = at::full({total + 1, H, d}, fill, xp.options());
        x.index_copy_(0, dst(is_q), xp.transpose(1, 2).reshape({B * n, H, d}));
        return at::where(ok, x.narrow(0, 0, total), NAN);
    }

    // (B, Hq, max_q) -> (Hq, total_q), rows outside every sequence `fill`.
    at::Tensor back_lse(const at::Tensor &lp, double fill) const
    {
        const int64_t Hq = lp.size(1);
        at::Tensor x = at::full({Hq, total_q + 1}, fill, lp.options());
        x.index_copy_(1, dst(true), lp.permute({1, 0, 2}).reshape({Hq, B * max_q}));
        return at::where(ok, x.narrow(1, 0, total_q), NAN);
    }
};

// Packed sequences: q (total_q, Hq, d), k, v (total_k, Hkv, d), cu_seqlens int32 (B + 1,) on q's
// device. The CPU checks the cu_seqlens values (they are host memory); CUDA never reads them on the
// host: the kernel (fp16/bf16) or the exact path (through PyTorch on sequences padded to
// max_seqlen) makes the whole output NaN when they break the rules.
std::tuple<at::Tensor, at::Tensor> forward_varlen(const at::Tensor &q_in, const at::Tensor &k_in,
                                                  const at::Tensor &v_in, const at::Tensor &cu_q,
                                                  const at::Tensor &cu_k, int64_t max_q, int64_t max_k,
                                                  std::optional<double> scale, bool causal, int64_t align,
                                                  int64_t window_left, int64_t window_right,
                                                  std::optional<double> softcap,
                                                  const std::optional<at::Tensor> &alibi_slopes,
                                                  const std::optional<at::Tensor> &sinks)
{
    const char *op = "fa.forward_varlen";
    const bool exact = g_force_exact.load();
    const int64_t B = check_packed_inputs(op, q_in, k_in, v_in, cu_q, cu_k, max_q, max_k, scale);
    const int64_t total_q = q_in.size(0), total_k = k_in.size(0);
    const int64_t Hq = q_in.size(1), d = q_in.size(2);
    const at::Tensor cq = cu_q.contiguous(), ck = cu_k.contiguous();
    if (!q_in.is_cuda() && !exact)              // the exact path keeps CUDA's contract (no host reads)
        check_host_cu_seqlens(op, cq, ck, B, max_q, max_k, total_q, total_k);
    const Variants va = check_variants(op, q_in, scale, B, Hq, max_q, max_k, align, window_left, window_right, softcap,
                                       alibi_slopes, sinks, std::nullopt, std::nullopt);
    // No packed query: nothing to compute. No packed key: every sequence is keyless (the CPU checked
    // it above; on CUDA one that claims keys breaks the rule lengths <= max_seqlen_k and gives NaN).
    // Either way an empty tensor has no data pointer to hand to fa.h.
    if (total_q == 0)
        return {at::empty({0, Hq, d}, q_in.options()), at::empty({Hq, 0}, q_in.options().dtype(at::kFloat))};
    if (total_k == 0)
        max_k = 0;
    clamp_max_seqlen(max_q, max_k, total_q, total_k);
    const at::Tensor q = q_in.stride(2) == 1 ? q_in : q_in.contiguous();
    const at::Tensor k = k_in.stride(2) == 1 ? k_in : k_in.contiguous();
    const at::Tensor v = v_in.stride(2) == 1 ? v_in : v_in.contiguous();
    const float sc = static_cast<float>(scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(d)));

    at::Tensor o = at::empty({total_q, Hq, d}, q.options());
    at::Tensor lse = at::empty({Hq, total_q}, q.options().dtype(at::kFloat));
    fa_params p = packed_params(q, k, v, o, lse, B, max_q, max_k, sc, causal);
    fa_variants fv = to_fa_variants(va, q.scalar_type());
    fv.cu_seqlens_q = cq.data_ptr<int32_t>();
    fv.cu_seqlens_k = ck.data_ptr<int32_t>();
    fv.total_q = total_q;
    fv.total_k = total_k;
#ifdef FA_WITH_CUDA
    if (q.is_cuda() && !exact) {                // the kernels that take packed sequences, else the exact path
        const int status = run_cuda(p, &fv, q);
        if (status != FA_ERR_UNSUPPORTED) {
            check_status(op, status);
            return {o, lse};
        }
    }
#endif

    if (exact || q.is_cuda()) {
        // Each sequence padded to max_seqlen, attended with its real lengths, its rows scattered back
        // (rows outside every sequence NaN).
        const Padded pd(cq, ck, B, max_q, max_k, total_q, total_k);
        auto [op_, lp] = exact_attention(pd.rows(q, true), pd.rows(k, false), pd.rows(v, false), sc, causal, va,
                                         pd.len_q, pd.len_k);
        return {pd.back(op_, true, NAN), pd.back_lse(lp, NAN)};
    }
    check_status(op, fa_forward_variants_cpu(&p, &fv));
    // Rows past the last sequence belong to none: NaN, as the exact path gives them.
    const int64_t end = cq.data_ptr<int32_t>()[B];
    if (end < total_q) {
        o.narrow(0, end, total_q - end).fill_(NAN);
        lse.narrow(1, end, total_q - end).fill_(NAN);
    }
    return {o, lse};
}

// ---- The plain forward ops ------------------------------------------------------------------

int64_t exact_calls(bool reset)
{
    return reset ? g_exact_calls.exchange(0) : g_exact_calls.load();
}

std::tuple<at::Tensor, at::Tensor> run(const char *op, const at::Tensor &q, const at::Tensor &k,
                                       const at::Tensor &v, std::optional<double> scale, bool causal,
                                       bool want_lse)
{
    Call c = prepare(op, q, k, v, scale, causal, want_lse);
    int status;
    if (c.q.is_cuda()) {
#ifdef FA_WITH_CUDA
        status = run_cuda(c.p, nullptr, c.q);
#else
        status = FA_ERR_NO_CUDA;
#endif
    } else {
        status = fa_forward_cpu(&c.p);
    }
    check_status(op, status);
    return {c.o, c.lse};
}

at::Tensor forward(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, std::optional<double> scale,
                   bool causal)
{
    return std::get<0>(run("fa.forward", q, k, v, scale, causal, false));
}

std::tuple<at::Tensor, at::Tensor> forward_lse(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
                                               std::optional<double> scale, bool causal)
{
    return run("fa.forward_lse", q, k, v, scale, causal, true);
}

#ifdef FA_WITH_CUDA
// The benchmark's baseline: same schema, N×N fp32 scores materialised in a scratch tensor.
at::Tensor naive_forward(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
                         std::optional<double> scale, bool causal)
{
    Call c = prepare("fa.naive_forward", q, k, v, scale, causal, false);
    const c10::cuda::CUDAGuard guard(c.q.device());
    const int64_t n_floats = static_cast<int64_t>(fa_naive_scratch_bytes(&c.p) / sizeof(float));
    at::Tensor scratch = at::empty({n_floats}, c.q.options().dtype(at::kFloat));
    const int status = fa_naive_forward(&c.p, scratch.data_ptr<float>(), c10::cuda::getCurrentCUDAStream().stream());
    check_status("fa.naive_forward", status);
    return c.o;
}
#endif

// ---- Backward -----------------------------------------------------------------------------

// The backward pass through PyTorch (CUDA, and the CPU under _set_exact): scores recomputed from
// lse a block of query rows at a time, as exact_attention computes them, then FlashAttention-2's
// formulas (D from the fp32 P: Σ_j P dP). Returns dq, dk, dv in q's dtype and dsinks (Hq) fp32 (empty without sinks).
// q_len, k_len (B,) int64 or undefined: each sequence's real lengths, as in exact_attention (rows past
// q_len must come with lse = −inf: they then add nothing).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> exact_backward(
    const at::Tensor &dout, const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, const at::Tensor &out,
    const at::Tensor &lse, const at::Tensor &dlse, const at::Tensor &delta, double scale, bool causal,
    const Variants &va, const at::Tensor &q_len = at::Tensor(), const at::Tensor &k_len = at::Tensor())
{
    g_exact_calls++;
    const int64_t B = q.size(0), Hq = q.size(1), Nq = q.size(2), d = q.size(3), Hkv = k.size(1), Nk = k.size(2);
    const int64_t G = Hkv > 0 ? Hq / Hkv : 1;
    const auto f32 = q.options().dtype(at::kFloat), i64 = q.options().dtype(at::kLong);
    at::Tensor dq = at::zeros({B, Hq, Nq, d}, f32), dk = at::zeros({B, Hkv, Nk, d}, f32),
               dv = at::zeros({B, Hkv, Nk, d}, f32);
    at::Tensor dsinks = va.sinks.defined() ? at::zeros({Hq}, f32) : at::empty({0}, f32);
    if (B * Hq * Nq == 0) {
        return {dq.to(q.scalar_type()), dk.to(q.scalar_type()), dv.to(q.scalar_type()), dsinks};
    }
    const at::Tensor k32 = k.to(at::kFloat), v32 = v.to(at::kFloat);
    at::Tensor shift = at::zeros({B, 1, 1, 1}, i64);   // δ per sequence
    if (va.align == FA_ALIGN_BOTTOM_RIGHT)
        shift = ((k_len.defined() ? k_len : at::full({B}, Nk, i64)) - (q_len.defined() ? q_len : at::full({B}, Nq, i64)))
                    .view({B, 1, 1, 1});
    const int64_t rows = std::max<int64_t>(1, std::min<int64_t>(Nq, (int64_t(1) << 26) / std::max<int64_t>(B * Hq * Nk, 1)));
    for (int64_t r0 = 0; r0 < Nq; r0 += rows) {
        const int64_t rc = std::min(rows, Nq - r0);
        const at::Tensor qc = q.narrow(2, r0, rc).to(at::kFloat), doc = dout.narrow(2, r0, rc).to(at::kFloat);
        const at::Tensor l = lse.narrow(2, r0, rc).unsqueeze(3);
        const at::Tensor dl = dlse.defined() ? dlse.narrow(2, r0, rc).unsqueeze(3) : at::zeros_like(l);
        if (Nk == 0) {                          // every row sees only its sink: D = 0
            if (va.sinks.defined())
                dsinks -= (at::exp(va.sinks.view({1, Hq, 1, 1}) - l).masked_fill(l.isneginf(), 0.0) * -dl).sum({0, 2, 3});
            continue;
        }
        const at::Tensor i = at::arange(r0, r0 + rc, i64).view({1, 1, rc, 1}) + shift;
        at::Tensor visible, t;
        const at::Tensor sc = exact_scores(qc, k32, scale, causal, va, i, k_len, r0, &visible, &t);
        // P (B, Hq, rc, Nk) and each row's exp(sink − lse). A given delta (a ring step) comes with the
        // whole row's lse: P = exp(s − lse). Else the forward's own weights e / Σe, e = exp(s − m),
        // as exact_attention has them: exp(s − lse) loses log Σe where |m| is huge.
        at::Tensor P, sink_w;
        const at::Tensor sink = va.sinks.defined() ? va.sinks.view({1, Hq, 1, 1}) : at::Tensor();
        if (delta.defined()) {
            visible = visible & l.isneginf().logical_not();
            P = at::where(visible, at::exp(sc - l), 0.0);
            if (sink.defined())
                sink_w = at::exp(sink - l).masked_fill(l.isneginf(), 0.0);
        } else {
            const Weights sw = softmax_weights(at::where(visible, sc, -INFINITY), va.sinks);
            P = sw.P;
            if (sink.defined())
                sink_w = at::where(sw.den == 0, 0.0, at::exp(sink - sw.m) / sw.den);
        }
        const at::Tensor Pg = P.reshape({B, Hkv, G * rc, Nk}), dOg = doc.reshape({B, Hkv, G * rc, d});
        dv += at::matmul(Pg.transpose(2, 3), dOg);
        const at::Tensor dP = at::matmul(dOg, v32.transpose(2, 3)).view({B, Hq, rc, Nk});
        // D = Σ_j P dP (= rowsum(dO ∘ O), from the fp32 P rather than the rounded output), less dlse.
        const at::Tensor D = (delta.defined() ? delta.narrow(2, r0, rc).unsqueeze(3) : (P * dP).sum(3, true)) - dl;
        if (va.sinks.defined())
            dsinks -= (sink_w * D).sum({0, 2, 3});
        at::Tensor dS = P * (dP - D);
        if (t.defined())
            dS = dS * (1.0 - t * t);
        dS = dS * scale;
        const at::Tensor dSg = dS.reshape({B, Hkv, G * rc, Nk});
        dq.narrow(2, r0, rc).copy_(at::matmul(dSg, k32).view({B, Hq, rc, d}));
        dk += at::matmul(dSg.transpose(2, 3), qc.reshape({B, Hkv, G * rc, d}));
    }
    return {dq.to(q.scalar_type()), dk.to(q.scalar_type()), dv.to(q.scalar_type()), dsinks};
}

#ifdef FA_WITH_CUDA
// The CUDA backward on the tensor-core kernel, its workspace from the caching allocator: whether it
// took the call. It declines (fp32, d > 128, a mask tensor, older GPUs, other families forced) with
// nothing written, and the caller computes exactly through PyTorch, counted.
bool backward_kernel(const char *op, const fa_backward_params &bp, const fa_variants &fv, const at::Tensor &q)
{
    size_t bytes = 0;
    int status = fa_backward_workspace_bytes(&bp, &fv, &bytes);
    if (status == FA_OK) {
        at::Tensor work = at::empty({static_cast<int64_t>(bytes)}, q.options().dtype(at::kByte));
        status = fa_backward_cuda(&bp, &fv, work.data_ptr(), bytes, c10::cuda::getCurrentCUDAStream().stream());
    }
    if (status == FA_ERR_UNSUPPORTED)
        return false;
    check_status(op, status);
    return true;
}
#endif

// fa::backward: the gradients of fa::forward / forward_lse / forward_variants (the autograd
// formulas in torch_flashattn/_autograd.py call it). out and lse are the forward's; dlse may be
// undefined (the loss did not use lse).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> backward(
    const at::Tensor &dout, const at::Tensor &q_in, const at::Tensor &k_in, const at::Tensor &v_in,
    const at::Tensor &out_in, const at::Tensor &lse_in, const std::optional<at::Tensor> &dlse_in,
    std::optional<double> scale, bool causal, int64_t align, int64_t window_left, int64_t window_right,
    std::optional<double> softcap, const std::optional<at::Tensor> &alibi_slopes, const std::optional<at::Tensor> &sinks,
    const std::optional<at::Tensor> &key_mask, const std::optional<at::Tensor> &attn_mask,
    const std::optional<at::Tensor> &delta_in)
{
    const char *op = "fa.backward";
    check_inputs(op, q_in, k_in, v_in, scale);
    const int64_t B = q_in.size(0), Hq = q_in.size(1), Nq = q_in.size(2), d = q_in.size(3), Nk = k_in.size(2);
    const std::pair<const char *, const at::Tensor *> same[] = {{"dout", &dout}, {"out", &out_in}};
    for (const auto &[name, t] : same)
        FA_CHECK(t->sizes() == q_in.sizes() && t->scalar_type() == q_in.scalar_type() && t->device() == q_in.device(),
                 "%s: %s must have q's shape %s, dtype and device, got %s %s on %s", op, name, shape(q_in).c_str(),
                 shape(*t).c_str(), dtype_name(*t), t->device().str().c_str());
    FA_CHECK(lse_in.dim() == 3 && lse_in.size(0) == B && lse_in.size(1) == Hq && lse_in.size(2) == Nq &&
                 lse_in.scalar_type() == at::kFloat && lse_in.device() == q_in.device(),
             "%s: lse must be float32 (B, Hq, Nq) = (%lld, %lld, %lld) on q's device, got %s %s", op, (long long)B,
             (long long)Hq, (long long)Nq, dtype_name(lse_in), shape(lse_in).c_str());
    // dlse and delta: optional float32 tensors of lse's shape.
    auto like_lse = [&](const char *name, const std::optional<at::Tensor> &t) {
        if (!t.has_value())
            return at::Tensor();
        FA_CHECK(t->sizes() == lse_in.sizes() && t->scalar_type() == at::kFloat && t->device() == q_in.device(),
                 "%s: %s must be float32 of lse's shape %s on q's device, got %s %s", op, name,
                 shape(lse_in).c_str(), dtype_name(*t), shape(*t).c_str());
        return t->contiguous();
    };
    const at::Tensor dlse = like_lse("dlse", dlse_in), delta = like_lse("delta", delta_in);
    const Variants va = check_variants(op, q_in, scale, B, Hq, Nq, Nk, align, window_left, window_right, softcap,
                                       alibi_slopes, sinks, key_mask, attn_mask);
    const float sc = static_cast<float>(scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(d)));
    const at::Tensor q = last_dim_contiguous(q_in), k = last_dim_contiguous(k_in), v = last_dim_contiguous(v_in);
    const at::Tensor o = last_dim_contiguous(out_in), dO = last_dim_contiguous(dout), lse = lse_in.contiguous();
#ifdef FA_WITH_CUDA
    std::optional<c10::cuda::CUDAGuard> guard;
    if (q.is_cuda())
        guard.emplace(q.device());
#endif
    // torch.use_deterministic_algorithms(True): the kernel adds dQ with atomics (its sums' order varies
    // run to run), so CUDA calls take the exact path (under the mode, cuBLAS asks for its workspace setting).
    if (g_force_exact.load() || (q.is_cuda() && at::globalContext().deterministicAlgorithms()))
        return exact_backward(dO, q, k, v, o, lse, dlse, delta, sc, causal, va);
    at::Tensor dq = at::empty_like(q, at::MemoryFormat::Contiguous), dk = at::empty_like(k, at::MemoryFormat::Contiguous),
               dv = at::empty_like(v, at::MemoryFormat::Contiguous);
    at::Tensor dsinks = va.sinks.defined() ? at::zeros({Hq}, q.options().dtype(at::kFloat))
                                           : at::empty({0}, q.options().dtype(at::kFloat));
    fa_backward_params bp;
    std::memset(&bp, 0, sizeof(bp));
    fa_params &p = bp.p;
    p.q = q.data_ptr(); p.k = k.data_ptr(); p.v = v.data_ptr(); p.o = const_cast<void *>(o.data_ptr());
    p.lse = lse.data_ptr<float>();
    p.q_batch_stride = q.stride(0); p.q_head_stride = q.stride(1); p.q_row_stride = q.stride(2);
    p.k_batch_stride = k.stride(0); p.k_head_stride = k.stride(1); p.k_row_stride = k.stride(2);
    p.v_batch_stride = v.stride(0); p.v_head_stride = v.stride(1); p.v_row_stride = v.stride(2);
    p.o_batch_stride = o.stride(0); p.o_head_stride = o.stride(1); p.o_row_stride = o.stride(2);
    p.B = B; p.Hq = Hq; p.Hkv = k.size(1); p.Nq = Nq; p.Nk = Nk; p.d = d;
    p.scale = sc;
    p.causal = causal ? 1 : 0;
    p.dtype = to_fa_dtype(q.scalar_type());
    p.num_threads = at::get_num_threads();
    bp.dout = dO.data_ptr();
    bp.do_batch_stride = dO.stride(0); bp.do_head_stride = dO.stride(1); bp.do_row_stride = dO.stride(2);
    bp.dlse = dlse.defined() ? dlse.data_ptr<float>() : nullptr;
    bp.delta = delta.defined() ? delta.data_ptr<float>() : nullptr;
    bp.dq = dq.data_ptr(); bp.dk = dk.data_ptr(); bp.dv = dv.data_ptr();
    bp.dq_batch_stride = dq.stride(0); bp.dq_head_stride = dq.stride(1); bp.dq_row_stride = dq.stride(2);
    bp.dk_batch_stride = dk.stride(0); bp.dk_head_stride = dk.stride(1); bp.dk_row_stride = dk.stride(2);
    bp.dv_batch_stride = dv.stride(0); bp.dv_head_stride = dv.stride(1); bp.dv_row_stride = dv.stride(2);
    bp.dsinks = va.sinks.defined() ? dsinks.data_ptr<float>() : nullptr;
    const fa_variants fv = to_fa_variants(va, q.scalar_type());
    if (!q.is_cuda()) {
        check_status(op, fa_backward_cpu(&bp, &fv));
        return {dq, dk, dv, dsinks};
    }
#ifdef FA_WITH_CUDA
    if (backward_kernel(op, bp, fv, q))
        return {dq, dk, dv, dsinks};
#endif
    return exact_backward(dO, q, k, v, o, lse, dlse, delta, sc, causal, va);
}

// The gradients of fa::forward_varlen: q, dout, out (total_q, Hq, d), k, v (total_k, Hkv, d), lse and
// dlse (Hq, total_q). Rows outside every sequence get zero gradients. The CPU checks the cu_seqlens
// values; CUDA runs the tensor-core kernel, else (and the CPU under _set_exact) exact_backward on the
// sequences padded to max_seqlen; with no host read: bad cu_seqlens make every gradient NaN, as the
// forward does.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> backward_varlen(
    const at::Tensor &dout_in, const at::Tensor &q_in, const at::Tensor &k_in, const at::Tensor &v_in,
    const at::Tensor &out_in, const at::Tensor &lse_in, const std::optional<at::Tensor> &dlse_in,
    const at::Tensor &cu_q, const at::Tensor &cu_k, int64_t max_q, int64_t max_k, std::optional<double> scale,
    bool causal, int64_t align, int64_t window_left, int64_t window_right, std::optional<double> softcap,
    const std::optional<at::Tensor> &alibi_slopes, const std::optional<at::Tensor> &sinks)
{
    const char *op = "fa.backward_varlen";
    const bool exact = g_force_exact.load();
    const int64_t B = check_packed_inputs(op, q_in, k_in, v_in, cu_q, cu_k, max_q, max_k, scale);
    const std::pair<const char *, const at::Tensor *> same[] = {{"dout", &dout_in}, {"out", &out_in}};
    for (const auto &[name, t] : same)
        FA_CHECK(t->sizes() == q_in.sizes() && t->scalar_type() == q_in.scalar_type() && t->device() == q_in.device(),
                 "%s: %s must have q's shape %s, dtype and device, got %s %s on %s", op, name, shape(q_in).c_str(),
                 shape(*t).c_str(), dtype_name(*t), t->device().str().c_str());
    const int64_t total_q = q_in.size(0), total_k = k_in.size(0), Hq = q_in.size(1), d = q_in.size(2);
    for (const auto &[name, t] : {std::pair<const char *, const at::Tensor *>{"lse", &lse_in},
                                  std::pair<const char *, const at::Tensor *>{"dlse", dlse_in ? &*dlse_in : nullptr}})
        FA_CHECK(t == nullptr || (t->dim() == 2 && t->size(0) == Hq && t->size(1) == total_q &&
                                  t->scalar_type() == at::kFloat && t->device() == q_in.device()),
                 "%s: %s must be float32 (Hq, total_q) = (%lld, %lld) on q's device, got %s %s", op, name,
                 (long long)Hq, (long long)total_q, t ? dtype_name(*t) : "", t ? shape(*t).c_str() : "");
    const Variants va = check_variants(op, q_in, scale, B, Hq, max_q, max_k, align, window_left, window_right, softcap,
                                       alibi_slopes, sinks, std::nullopt, std::nullopt);
    const float sc = static_cast<float>(scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(d)));
    if (total_q == 0) {                         // as forward_varlen: no row, no gradient, no data pointer
        if (!q_in.is_cuda() && !exact)
            check_host_cu_seqlens(op, cu_q.contiguous(), cu_k.contiguous(), B, max_q, max_k, total_q, total_k);
        const auto f32 = q_in.options().dtype(at::kFloat);
        return {at::zeros_like(q_in), at::zeros_like(k_in), at::zeros_like(v_in),
                va.sinks.defined() ? at::zeros({Hq}, f32) : at::empty({0}, f32)};
    }
    if (!q_in.is_cuda() && !exact)             // the user's max_seqlen in its messages
        check_host_cu_seqlens(op, cu_q.contiguous(), cu_k.contiguous(), B, max_q, max_k, total_q, total_k);
    if (total_k == 0)
        max_k = 0;
    clamp_max_seqlen(max_q, max_k, total_q, total_k);
    const at::Tensor cq = cu_q.contiguous(), ck = cu_k.contiguous(), lse = lse_in.contiguous();
    const at::Tensor dlse = dlse_in.has_value() ? dlse_in->contiguous() : at::Tensor();
    auto unit_last = [](const at::Tensor &t) { return t.stride(2) == 1 ? t : t.contiguous(); };   // (total, H, d)
    const at::Tensor q = unit_last(q_in), k = unit_last(k_in), v = unit_last(v_in), o = unit_last(out_in),
                     dO = unit_last(dout_in);

    auto exact_padded = [&]() -> std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> {
        // Padded as forward_varlen's exact path does; padding rows get dO = 0 and lse = −inf (no
        // gradient), padding keys are invisible (k_len); rows outside every sequence get zero gradients.
        const Padded pd(cq, ck, B, max_q, max_k, total_q, total_k);
        const at::Tensor dop = pd.rows(dO, true) * pd.real_q.view({B, 1, max_q, 1});
        const at::Tensor dlsep = dlse.defined() ? pd.lse(dlse, 0.0) : at::Tensor();
        auto [dqp, dkp, dvp, dsinks] = exact_backward(dop, pd.rows(q, true), pd.rows(k, false), pd.rows(v, false),
                                                      pd.rows(o, true), pd.lse(lse, -INFINITY), dlsep, at::Tensor(),
                                                      sc, causal, va, pd.len_q, pd.len_k);
        return {pd.back(dqp, true, 0.0), pd.back(dkp, false, 0.0), pd.back(dvp, false, 0.0),
                at::where(pd.ok, dsinks, NAN)};
    };
#ifdef FA_WITH_CUDA
    std::optional<c10::cuda::CUDAGuard> guard;
    if (q.is_cuda())
        guard.emplace(q.device());
#endif
    // torch.use_deterministic_algorithms(True): the kernel's dQ sums vary in order (fa::backward).
    if (exact || (q.is_cuda() && at::globalContext().deterministicAlgorithms()))
        return exact_padded();
    at::Tensor dq = at::zeros_like(q, at::MemoryFormat::Contiguous), dk = at::zeros_like(k, at::MemoryFormat::Contiguous),
               dv = at::zeros_like(v, at::MemoryFormat::Contiguous);
    at::Tensor dsinks = va.sinks.defined() ? at::zeros({Hq}, q.options().dtype(at::kFloat))
                                           : at::empty({0}, q.options().dtype(at::kFloat));
    fa_backward_params bp;
    std::memset(&bp, 0, sizeof(bp));
    bp.p = packed_params(q, k, v, o, lse, B, max_q, max_k, sc, causal);
    bp.dout = dO.data_ptr();
    bp.do_head_stride = dO.stride(1); bp.do_row_stride = dO.stride(0);
    bp.dlse = dlse.defined() ? dlse.data_ptr<float>() : nullptr;
    bp.dq = dq.data_ptr(); bp.dk = dk.data_ptr(); bp.dv = dv.data_ptr();
    bp.dq_head_stride = dq.stride(1); bp.dq_row_stride = dq.stride(0);
    bp.dk_head_stride = dk.stride(1); bp.dk_row_stride = dk.stride(0);
    bp.dv_head_stride = dv.stride(1); bp.dv_row_stride = dv.stride(0);
    bp.dsinks = va.sinks.defined() ? dsinks.data_ptr<float>() : nullptr;
    fa_variants fv = to_fa_variants(va, q.scalar_type());
    fv.cu_seqlens_q = cq.data_ptr<int32_t>();
    fv.cu_seqlens_k = ck.data_ptr<int32_t>();
    fv.total_q = total_q;
    fv.total_k = total_k;
#ifdef FA_WITH_CUDA
    if (q.is_cuda())
        return backward_kernel(op, bp, fv, q) ? std::make_tuple(dq, dk, dv, dsinks) : exact_padded();
#endif
    check_status(op, fa_backward_cpu(&bp, &fv));
    return {dq, dk, dv, dsinks};
}

// ---- The KV cache ------------------------------------------------------------------------------

// A KV cache call with variants, computed exactly through PyTorch (fp32: no split-KV kernel takes
// its variants) with the CUDA kernels' contract: no host synchronisation, and when any
// cache_seqlens[b] + Nnew leaves 0..Nmax the caches stay untouched and the output is NaN.
at::Tensor kvcache_exact(const at::Tensor &q, const at::Tensor &k_cache, const at::Tensor &v_cache,
                         const at::Tensor &seqlens, const at::Tensor &kn, const at::Tensor &vn, double scale,
                         bool causal, const Variants &va_in)
{
    const int64_t B = q.size(0), Nmax = k_cache.size(2), nnew = kn.defined() ? kn.size(2) : 0;
    const auto i64 = q.options().dtype(at::kLong);
    const at::Tensor start = seqlens.defined() ? seqlens.to(at::kLong) : at::full({B}, Nmax - nnew, i64);
    const at::Tensor ok = ((start >= 0) & (start + nnew <= Nmax)).all();
    if (nnew > 0 && Nmax > 0) {
        // Rows start .. start + Nnew (clamped into the cache); a bad call writes back what is there.
        const at::Tensor rows = (start.view({B, 1}) + at::arange(nnew, i64).view({1, nnew})).clamp(0, Nmax - 1);
        for (const auto &[cache, fresh] : {std::pair<const at::Tensor *, const at::Tensor *>{&k_cache, &kn},
                                           std::pair<const at::Tensor *, const at::Tensor *>{&v_cache, &vn}}) {
            const at::Tensor idx = rows.view({B, 1, nnew, 1}).expand({B, cache->size(1), nnew, cache->size(3)});
            at::Tensor dst = *cache;
            dst.scatter_(2, idx, at::where(ok, *fresh, dst.gather(2, idx)));
        }
    }
    Variants va = va_in;
    va.align = FA_ALIGN_BOTTOM_RIGHT;          // the queries are each sequence's last Nq tokens
    const at::Tensor k_len = (start + nnew).clamp(0, Nmax);
    const at::Tensor q_len = at::full({B}, q.size(2), i64);
    at::Tensor out = std::get<0>(exact_attention(q, k_cache, v_cache, scale, causal, va, q_len, k_len));
    return at::where(ok, out, NAN);
}

// Whether two caches of one storage that PyTorch's test cannot judge (strided views) share an element:
// fa_views_meet's exact search over their indices (interleaved K and V rows of one buffer do not).
bool caches_meet(const at::Tensor &k_cache, const at::Tensor &v_cache)
{
    if (!k_cache.storage().is_alias_of(v_cache.storage()))
        return false;
    const int64_t n[4] = {k_cache.size(0), k_cache.size(1), k_cache.size(2), k_cache.size(3)};
    const int64_t sk[4] = {k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), k_cache.stride(3)};
    const int64_t sv[4] = {v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), v_cache.stride(3)};
    return fa_views_meet(k_cache.data_ptr(), v_cache.data_ptr(), k_cache.element_size(), 4, n, sk, sv) != 0;
}

// Attention over a KV cache, appending k_new / v_new into it first (fa.h: fa_kvcache_params). On
// CUDA, cache_seqlens stays on the device: a bad entry gives NaN output and untouched caches
// instead of an error (fa.h, fa_forward_kvcache_cuda).
at::Tensor kvcache_call(const at::Tensor &q_arg, const at::Tensor &k_cache, const at::Tensor &v_cache,
                        const std::optional<at::Tensor> &cache_seqlens, const std::optional<at::Tensor> &k_new,
                        const std::optional<at::Tensor> &v_new, std::optional<double> scale, bool causal,
                        int64_t window_left, int64_t window_right, std::optional<double> softcap,
                        const std::optional<at::Tensor> &alibi_slopes, const std::optional<at::Tensor> &sinks)
{
    const char *op = "fa.forward_kvcache";
    const bool exact = g_force_exact.load();
    at::Tensor q = q_arg;                       // copied below if it may read rows the append writes
    check_inputs(op, q, k_cache, v_cache, scale, {"k_cache", "v_cache"});
    if (at::GradMode::is_enabled()) {           // forward only: a gradient asked for would silently be None
        const std::pair<const char *, const std::optional<at::Tensor>> all[] = {
            {"q", q}, {"k_cache", k_cache}, {"v_cache", v_cache}, {"k_new", k_new}, {"v_new", v_new},
            {"alibi_slopes", alibi_slopes}, {"sinks", sinks}};
        for (const auto &[name, t] : all)
            FA_CHECK(!t.has_value() || !t->requires_grad(),
                     "%s: the KV-cache op has no gradient; %s requires grad (pass %s.detach(), or run under "
                     "torch.no_grad())", op, name, name);
    }
    FA_CHECK(k_cache.stride(3) == 1 && v_cache.stride(3) == 1,
             "%s: k_cache and v_cache must have a contiguous last dimension (they are written in place)", op);
    const int64_t B = q.size(0), Hkv = k_cache.size(1), d = q.size(3);
    if (cache_seqlens.has_value()) {
        const at::Tensor &s = *cache_seqlens;
        FA_CHECK(s.scalar_type() == at::kInt && s.dim() == 1 && s.size(0) == B && s.device() == q.device(),
                 "%s: cache_seqlens must be an int32 tensor of shape (B,) = (%lld,) on %s, got %s %s on %s", op,
                 (long long)B, q.device().str().c_str(), c10::toString(s.scalar_type()), shape(s).c_str(),
                 s.device().str().c_str());
    }
    FA_CHECK(k_new.has_value() == v_new.has_value(), "%s: k_new and v_new must be given together", op);
    at::Tensor kn, vn;
    if (k_new.has_value()) {
        const at::Tensor &kr = *k_new, &vr = *v_new;      // checked as given: k_new first, so kr.size(2) exists
        for (const at::Tensor *t : {&kr, &vr}) {
            FA_CHECK(t->dim() == 4 && t->size(0) == B && t->size(1) == Hkv && t->size(3) == d &&
                         t->size(2) == kr.size(2) && t->scalar_type() == q.scalar_type() && t->device() == q.device(),
                     "%s: k_new and v_new must both be (B, Hkv, Nnew, d) = (%lld, %lld, Nnew, %lld) of q's dtype %s "
                     "and device %s, got k_new %s %s on %s, v_new %s %s on %s", op, (long long)B, (long long)Hkv,
                     (long long)d, dtype_name(q), q.device().str().c_str(), dtype_name(kr), shape(kr).c_str(),
                     kr.device().str().c_str(), dtype_name(vr), shape(vr).c_str(), vr.device().str().c_str());
        }
        kn = last_dim_contiguous(kr);
        vn = last_dim_contiguous(vr);
        // Written in place: every cache element its own memory (not an expanded view), the caches
        // apart from each other and from the rows written into them, as PyTorch's in-place ops ask.
        for (const auto &[name, t] : {std::pair<const char *, const at::Tensor *>{"k_cache", &k_cache},
                                      {"v_cache", &v_cache}})
            FA_CHECK(at::has_internal_overlap(*t) != at::MemOverlap::Yes,
                     "%s: %s is written in place (k_new, v_new given) and must not have elements that share memory "
                     "(an expanded view, a stride of 0); pass %s.clone()", op, name, name);
        // New rows in a cache's own storage that the test cannot judge (TooHard: strided views) are
        // copied first, so that the append never reads a row it has already overwritten.
        const std::pair<const char *, const at::Tensor *> all[] = {
            {"k_cache", &k_cache}, {"v_cache", &v_cache}, {"k_new", &kn}, {"v_new", &vn}};
        at::Tensor *rows[] = {&kn, &vn};
        for (int a = 0; a < 2; a++)
            for (int b = a + 1; b < 4; b++) {
                const at::MemOverlapStatus lap = at::get_overlap_status(*all[a].second, *all[b].second);
                FA_CHECK(lap != at::MemOverlapStatus::Full && lap != at::MemOverlapStatus::Partial
                             && !(b == 1 && lap == at::MemOverlapStatus::TooHard && caches_meet(k_cache, v_cache)),
                         "%s: %s is written in place and must not share memory with %s", op, all[a].first,
                         all[b].first);
                if (b >= 2 && lap == at::MemOverlapStatus::TooHard
                    && all[b].second->storage().is_alias_of(all[a].second->storage()))
                    *rows[b - 2] = rows[b - 2]->clone();
            }
        // q is read after the append: a q in a cache's memory is refused, or copied where the test
        // cannot judge it.
        for (int a = 0; a < 2; a++) {
            const at::MemOverlapStatus lap = at::get_overlap_status(q, *all[a].second);
            FA_CHECK(lap != at::MemOverlapStatus::Full && lap != at::MemOverlapStatus::Partial,
                     "%s: %s is written in place (k_new, v_new given) and must not share memory with q; pass "
                     "q.clone()", op, all[a].first);
            if (lap == at::MemOverlapStatus::TooHard && q.storage().is_alias_of(all[a].second->storage()))
                q = q.clone();
        }
    }

    // fa.h's rule, 0 <= cache_seqlens[b] and cache_seqlens[b] + Nnew <= Nmax, named here where it can be
    // judged without reading the device: Nnew against Nmax always, each entry on the CPU (host memory).
    const int64_t Nmax = k_cache.size(2), nnew = kn.defined() ? kn.size(2) : 0;
    FA_CHECK(nnew <= Nmax, "%s: k_new and v_new append Nnew = %lld keys, more than the caches hold (Nmax = %lld)", op,
             (long long)nnew, (long long)Nmax);
    if (cache_seqlens.has_value() && !q.is_cuda()) {
        const at::Tensor s = cache_seqlens->contiguous();
        const int32_t *len = s.data_ptr<int32_t>();
        for (int64_t b = 0; b < B; b++)
            FA_CHECK(len[b] >= 0 && len[b] + nnew <= Nmax,
                     "%s: cache_seqlens[%lld] = %d with Nnew = %lld appended keys: each cache_seqlens[b] must be at "
                     "least 0 and cache_seqlens[b] + Nnew must be in 0..Nmax = 0..%lld", op, (long long)b, (int)len[b],
                     (long long)nnew, (long long)Nmax);
    }

    Call c = prepare(op, q, k_cache, v_cache, scale, causal, false);
    const Variants va = check_variants(op, q, scale, B, q.size(1), q.size(2), k_cache.size(2), FA_ALIGN_TOP_LEFT,
                                       window_left, window_right, softcap, alibi_slopes, sinks, std::nullopt,
                                       std::nullopt);
    const fa_variants fv = to_fa_variants(va, q.scalar_type());
    fa_kvcache_params kp;
    std::memset(&kp, 0, sizeof(kp));
    kp.p = c.p;
    const at::Tensor seqlens = cache_seqlens.has_value() ? cache_seqlens->contiguous() : at::Tensor();
    kp.cache_seqlens = cache_seqlens.has_value() ? seqlens.data_ptr<int32_t>() : nullptr;
    if (kn.defined() && kn.numel() > 0) {       // empty (B, Hkv or Nnew 0): nothing to append
        kp.k_new = kn.data_ptr();
        kp.v_new = vn.data_ptr();
        kp.kn_batch_stride = kn.stride(0); kp.kn_head_stride = kn.stride(1); kp.kn_row_stride = kn.stride(2);
        kp.vn_batch_stride = vn.stride(0); kp.vn_head_stride = vn.stride(1); kp.vn_row_stride = vn.stride(2);
        kp.Nnew = kn.size(2);
    }
    if (exact && va.any())                      // tests: the path CUDA takes for variants, on the CPU
        return kvcache_exact(q, k_cache, v_cache, seqlens, kn, vn, c.p.scale, causal, va);
    int status;
    if (q.is_cuda()) {
#ifdef FA_WITH_CUDA
        const c10::cuda::CUDAGuard guard(q.device());
        // Split-KV scratch (partial O and lse) sized from the shapes and the device only, so the
        // call never synchronises and a CUDA graph can capture it. Variants the kernels do not take
        // (fp32) are computed exactly (counted).
        size_t bytes = 0;
        status = va.any() ? fa_kvcache_variants_scratch_bytes(&kp, &fv, &bytes)
                          : fa_kvcache_scratch_bytes(&kp, &bytes);
        if (va.any() && status == FA_ERR_UNSUPPORTED)
            return kvcache_exact(q, k_cache, v_cache, seqlens, kn, vn, c.p.scale, causal, va);
        check_status(op, status);
        const at::Tensor scratch = at::empty({static_cast<int64_t>(bytes)}, q.options().dtype(at::kByte));
        status = va.any() ? fa_forward_kvcache_variants_cuda(&kp, &fv, bytes ? scratch.data_ptr() : nullptr, bytes,
                                                             c10::cuda::getCurrentCUDAStream().stream())
                          : fa_forward_kvcache_cuda(&kp, bytes ? scratch.data_ptr() : nullptr, bytes,
                                                    c10::cuda::getCurrentCUDAStream().stream());
#else
        status = FA_ERR_NO_CUDA;
#endif
    } else {
        status = fa_forward_kvcache_variants_cpu(&kp, &fv);
    }
    check_status(op, status);
    return c.o;
}

// fa::forward_kvcache: kvcache_call, then the caches it appended to get new versions, as PyTorch's
// in-place ops give theirs (autograd then refuses a graph that saved them before the write instead of
// reading the new rows); inference tensors keep none.
at::Tensor forward_kvcache(const at::Tensor &q, const at::Tensor &k_cache, const at::Tensor &v_cache,
                           const std::optional<at::Tensor> &cache_seqlens, const std::optional<at::Tensor> &k_new,
                           const std::optional<at::Tensor> &v_new, std::optional<double> scale, bool causal,
                           int64_t window_left, int64_t window_right, std::optional<double> softcap,
                           const std::optional<at::Tensor> &alibi_slopes, const std::optional<at::Tensor> &sinks)
{
    const at::Tensor out = kvcache_call(q, k_cache, v_cache, cache_seqlens, k_new, v_new, scale, causal, window_left,
                                        window_right, softcap, alibi_slopes, sinks);
    if (k_new.has_value())
        for (const at::Tensor *t : {&k_cache, &v_cache})
            if (!t->is_inference())
                torch::autograd::impl::bump_version(*t);
    return out;
}

// ---- Overrides ---------------------------------------------------------------------------------

// Private to tests and tools (torch_flashattn._testing.overrides): the fields of fa_overrides in
// their order in fa.h, zero = automatic.
constexpr int kOverrideFields = sizeof(fa_overrides) / sizeof(int);

void set_overrides(c10::IntArrayRef fields)
{
    FA_CHECK(static_cast<int>(fields.size()) == kOverrideFields, "fa._set_overrides: expected %d fields, got %d",
             kOverrideFields, static_cast<int>(fields.size()));
    int values[kOverrideFields];
    for (int i = 0; i < kOverrideFields; i++) {
        FA_CHECK(fields[i] >= INT32_MIN && fields[i] <= INT32_MAX, "fa._set_overrides: field %d = %lld is past a C int",
                 i, (long long)fields[i]);
        values[i] = static_cast<int>(fields[i]);
    }
    fa_overrides o;
    std::memcpy(&o, values, sizeof o);
    check_status("fa._set_overrides", fa_set_overrides(&o));
}

std::vector<int64_t> get_overrides()
{
    fa_overrides o;
    fa_get_overrides(&o);
    int values[kOverrideFields];
    std::memcpy(values, &o, sizeof o);
    return std::vector<int64_t>(values, values + kOverrideFields);
}

}  // namespace

// ---- Registration ------------------------------------------------------------------------------

TORCH_LIBRARY(fa, m)
{
    m.def("forward(Tensor q, Tensor k, Tensor v, float? scale=None, bool causal=False) -> Tensor");
    m.def("forward_lse(Tensor q, Tensor k, Tensor v, float? scale=None, bool causal=False) -> (Tensor, Tensor)");
    m.def("naive_forward(Tensor q, Tensor k, Tensor v, float? scale=None, bool causal=False) -> Tensor");
    const char *kvcache = "(Tensor q, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor? cache_seqlens=None, "
                          "Tensor? k_new=None, Tensor? v_new=None, float? scale=None, bool causal=False, "
                          "int window_left=-1, int window_right=-1, float? softcap=None, Tensor? alibi_slopes=None, "
                          "Tensor? sinks=None) -> Tensor";
    m.def((std::string("forward_kvcache") + kvcache).c_str());
    const char *variants = "(Tensor q, Tensor k, Tensor v, float? scale=None, bool causal=False, int align=0, "
                           "int window_left=-1, int window_right=-1, float? softcap=None, Tensor? alibi_slopes=None, "
                           "Tensor? sinks=None, Tensor? key_mask=None, Tensor? attn_mask=None) -> (Tensor, Tensor)";
    m.def((std::string("forward_variants") + variants).c_str());
    const char *varlen = "(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, "
                         "int max_seqlen_k, float? scale=None, bool causal=False, int align=0, int window_left=-1, "
                         "int window_right=-1, float? softcap=None, Tensor? alibi_slopes=None, Tensor? sinks=None) "
                         "-> (Tensor, Tensor)";
    m.def((std::string("forward_varlen") + varlen).c_str());
    m.def("_exact_calls(bool reset=False) -> int", &exact_calls);
    m.def("_set_exact(bool on) -> bool", &set_exact);
    m.def("backward(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, Tensor? dlse=None, "
          "float? scale=None, bool causal=False, int align=0, int window_left=-1, int window_right=-1, "
          "float? softcap=None, Tensor? alibi_slopes=None, Tensor? sinks=None, Tensor? key_mask=None, "
          "Tensor? attn_mask=None, Tensor? delta=None) -> (Tensor dq, Tensor dk, Tensor dv, Tensor dsinks)");
    m.def("backward_varlen(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, Tensor? dlse, "
          "Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, float? scale=None, "
          "bool causal=False, int align=0, int window_left=-1, int window_right=-1, float? softcap=None, "
          "Tensor? alibi_slopes=None, Tensor? sinks=None) -> (Tensor dq, Tensor dk, Tensor dv, Tensor dsinks)");
    m.def("_set_overrides(int[] fields) -> ()", &set_overrides);
    m.def("_get_overrides() -> int[]", &get_overrides);
}

// Forward-mode AD (torch.func.jvp, torch.autograd.forward_ad) has no formula here, and the autograd
// kernel that register_autograd makes passes dual tensors through unrecorded: their tangents would be
// dropped (a zero jvp). Under torch.func the kernels receive unwrapped tensors, the tangents left on
// functorch's wrappers; at the ADInplaceOrView key the wrappers are still there. So every op's tensor
// arguments are checked there, then the call goes on below the key.
bool has_tangent(const at::Tensor &t)
{
    const auto *meta = t.defined() ? torch::autograd::impl::get_autograd_meta(t) : nullptr;
    return meta != nullptr && meta->fw_grad_ && !meta->fw_grad_->empty();
}

void tangent_guard(const c10::OperatorHandle &op, c10::DispatchKeySet keys, torch::jit::Stack *stack)
{
    const auto &args = op.schema().arguments();
    const auto given = torch::jit::last(*stack, args.size());
    for (size_t i = 0; i < args.size(); i++) {
        if (given[i].isTensor() && has_tangent(given[i].toTensor())) {
            std::string name = op.schema().name();
            name.replace(name.find("::"), 2, ".");
            FA_CHECK(false, "%s: forward-mode AD (jvp) is not implemented; %s carries a tangent (use "
                     "F.scaled_dot_product_attention with the math backend)", name.c_str(), args[i].name().c_str());
        }
    }
    at::AutoDispatchBelowADInplaceOrView below;
    op.redispatchBoxed(keys & c10::after_ADInplaceOrView_keyset, stack);
}

TORCH_LIBRARY_IMPL(fa, ADInplaceOrView, m)
{
    for (const char *op : {"forward", "forward_lse", "naive_forward", "forward_kvcache", "forward_variants",
                           "forward_varlen", "backward", "backward_varlen"})
        m.impl(op, torch::CppFunction::makeFromBoxedFunction<&tangent_guard>());
}

TORCH_LIBRARY_IMPL(fa, CPU, m)
{
    m.impl("forward", &forward);
    m.impl("forward_lse", &forward_lse);
    m.impl("forward_kvcache", &forward_kvcache);
    m.impl("forward_variants", &forward_variants);
    m.impl("forward_varlen", &forward_varlen);
    m.impl("backward", &backward);
    m.impl("backward_varlen", &backward_varlen);
}

#ifdef FA_WITH_CUDA
TORCH_LIBRARY_IMPL(fa, CUDA, m)
{
    m.impl("forward", &forward);
    m.impl("forward_lse", &forward_lse);
    m.impl("naive_forward", &naive_forward);
    m.impl("forward_kvcache", &forward_kvcache);
    m.impl("forward_variants", &forward_variants);
    m.impl("forward_varlen", &forward_varlen);
    m.impl("backward", &backward);
    m.impl("backward_varlen", &backward_varlen);
}
#endif

// `import torch_flashattn._C` loads this library, which runs the registrations above.
extern "C" PyObject *PyInit__C(void)
{
    static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", "torch-flashattn ops (torch.ops.fa)", -1, nullptr};
    return PyModule_Create(&module);
}
