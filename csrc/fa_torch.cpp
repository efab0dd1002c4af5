// fa_torch.cpp — the one file that touches torch: registers the fa:: ops.
//
//   fa::forward(Tensor q, Tensor k, Tensor v, float? scale=None, bool causal=False) -> Tensor
//   fa::forward_lse(...same...) -> (Tensor out, Tensor lse)
//   fa::naive_forward(...same...) -> Tensor        (CUDA only: the benchmark's N×N baseline)
//   fa::forward_kvcache(q, k_cache!, v_cache!, cache_seqlens?, k_new?, v_new?, scale?, causal) -> Tensor
//                                                   (attention over a KV cache; CUDA: split-KV)
//   fa::_set_overrides(int[] fields), fa::_get_overrides() -> int[]   (tests and tools: fa_overrides)
//
// Same semantics as F.scaled_dot_product_attention(q, k, v, is_causal=causal,
// scale=scale, enable_gqa=True). This file validates the tensors (messages
// name the argument and what was expected), allocates the outputs, fills the
// fa_params struct of fa.h and calls the C backend (CPU) or the CUDA launcher
// on the current stream under a device guard. Fake (meta) kernels live in
// torch_flashattn/_ops.py.
#include <Python.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

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

// Every check raises a RuntimeError naming the argument and the expectation.
void check_inputs(const char *op, const at::Tensor &q, const at::Tensor &k, const at::Tensor &v,
                  std::optional<double> scale)
{
    const std::pair<const char *, const at::Tensor *> args[] = {{"q", &q}, {"k", &k}, {"v", &v}};
    for (const auto &[name, t] : args)
        FA_CHECK(t->dim() == 4, "%s: %s must be a 4-D tensor (B, H, N, d), got %d-D with shape %s", op, name,
                 (int)t->dim(), shape(*t).c_str());
    for (const auto &[name, t] : args) {
        FA_CHECK(t->device() == q.device(), "%s: q, k and v must be on the same device, got q on %s and %s on %s",
                 op, q.device().str().c_str(), name, t->device().str().c_str());
        FA_CHECK(t->scalar_type() == q.scalar_type(), "%s: q, k and v must have the same dtype, got q %s and %s %s",
                 op, c10::toString(q.scalar_type()), name, c10::toString(t->scalar_type()));
    }
    const auto dt = q.scalar_type();
    FA_CHECK(dt == at::kFloat || dt == at::kHalf || dt == at::kBFloat16,
             "%s: q, k and v must be float32, float16 or bfloat16, got %s", op, c10::toString(dt));
    FA_CHECK(q.device().is_cpu() || q.device().is_cuda(), "%s: q, k and v must be CPU or CUDA tensors, got %s", op,
             q.device().str().c_str());

    const std::string shapes = "q " + shape(q) + ", k " + shape(k) + ", v " + shape(v);
    FA_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0), "%s: batch size B must match, got %s", op,
             shapes.c_str());
    FA_CHECK(k.size(3) == q.size(3) && v.size(3) == q.size(3), "%s: head dim d (last dimension) must match, got %s",
             op, shapes.c_str());
    FA_CHECK(v.size(2) == k.size(2), "%s: k and v must have the same sequence length Nk, got %s", op,
             shapes.c_str());
    FA_CHECK(v.size(1) == k.size(1), "%s: k and v must have the same number of heads Hkv, got %s", op,
             shapes.c_str());
    const int64_t Hq = q.size(1), Hkv = k.size(1), d = q.size(3);
    FA_CHECK(Hq == 0 || (Hkv >= 1 && Hq % Hkv == 0),
             "%s: the number of query heads Hq = %lld must be a multiple of the number of key/value heads Hkv = %lld",
             op, (long long)Hq, (long long)Hkv);
    FA_CHECK(d >= 1 && d <= FA_MAX_HEAD_DIM, "%s: head dim d must be in 1..%d, got %lld", op, FA_MAX_HEAD_DIM,
             (long long)d);
    FA_CHECK(!scale.has_value() || std::isfinite(*scale), "%s: scale must be a finite number, got %g", op,
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

std::tuple<at::Tensor, at::Tensor> run(const char *op, const at::Tensor &q, const at::Tensor &k,
                                       const at::Tensor &v, std::optional<double> scale, bool causal,
                                       bool want_lse)
{
    Call c = prepare(op, q, k, v, scale, causal, want_lse);
    int status;
    if (c.q.is_cuda()) {
#ifdef FA_WITH_CUDA
        const c10::cuda::CUDAGuard guard(c.q.device());
        const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
        // Scratch for the split-KV route or the Hopper kernel's split last round, sized from the
        // shapes and the device only (no synchronisation; a CUDA graph can capture the call).
        size_t bytes = 0;
        status = fa_forward_scratch_bytes(&c.p, &bytes);
        if (status == FA_OK) {
            const at::Tensor scratch = bytes ? at::empty({static_cast<int64_t>(bytes)}, c.q.options().dtype(at::kByte))
                                             : at::Tensor();
            status = fa_forward_cuda_scratch(&c.p, bytes ? scratch.data_ptr() : nullptr, bytes, stream);
        }
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

// Attention over a KV cache, appending k_new / v_new into it first (fa.h: fa_kvcache_params). On
// CUDA, cache_seqlens stays on the device: a bad entry gives NaN output and untouched caches
// instead of an error (fa.h, fa_forward_kvcache_cuda).
at::Tensor forward_kvcache(const at::Tensor &q, const at::Tensor &k_cache, const at::Tensor &v_cache,
                           const std::optional<at::Tensor> &cache_seqlens, const std::optional<at::Tensor> &k_new,
                           const std::optional<at::Tensor> &v_new, std::optional<double> scale, bool causal)
{
    const char *op = "fa.forward_kvcache";
    check_inputs(op, q, k_cache, v_cache, scale);
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
        kn = last_dim_contiguous(*k_new);
        vn = last_dim_contiguous(*v_new);
        for (const at::Tensor *t : {&kn, &vn}) {
            FA_CHECK(t->dim() == 4 && t->size(0) == B && t->size(1) == Hkv && t->size(3) == d &&
                         t->size(2) == kn.size(2) && t->scalar_type() == q.scalar_type() && t->device() == q.device(),
                     "%s: k_new and v_new must both be (B, Hkv, Nnew, d) = (%lld, %lld, Nnew, %lld) of q's dtype and "
                     "device, got k_new %s, v_new %s", op, (long long)B, (long long)Hkv, (long long)d,
                     shape(kn).c_str(), shape(vn).c_str());
        }
    }

    Call c = prepare(op, q, k_cache, v_cache, scale, causal, false);
    fa_kvcache_params kp;
    std::memset(&kp, 0, sizeof(kp));
    kp.p = c.p;
    const at::Tensor seqlens = cache_seqlens.has_value() ? cache_seqlens->contiguous() : at::Tensor();
    kp.cache_seqlens = cache_seqlens.has_value() ? seqlens.data_ptr<int32_t>() : nullptr;
    if (kn.defined()) {
        kp.k_new = kn.data_ptr();
        kp.v_new = vn.data_ptr();
        kp.kn_batch_stride = kn.stride(0); kp.kn_head_stride = kn.stride(1); kp.kn_row_stride = kn.stride(2);
        kp.vn_batch_stride = vn.stride(0); kp.vn_head_stride = vn.stride(1); kp.vn_row_stride = vn.stride(2);
        kp.Nnew = kn.size(2);
    }
    int status;
    if (q.is_cuda()) {
#ifdef FA_WITH_CUDA
        // Split-KV scratch (partial O and lse) sized from the shapes and the device only, so the
        // call never synchronises and a CUDA graph can capture it.
        const c10::cuda::CUDAGuard guard(q.device());
        size_t bytes = 0;
        status = fa_kvcache_scratch_bytes(&kp, &bytes);
        check_status(op, status);
        const at::Tensor scratch = at::empty({static_cast<int64_t>(bytes)}, q.options().dtype(at::kByte));
        status = fa_forward_kvcache_cuda(&kp, bytes ? scratch.data_ptr() : nullptr, bytes,
                                         c10::cuda::getCurrentCUDAStream().stream());
#else
        status = FA_ERR_NO_CUDA;
#endif
    } else {
        status = fa_forward_kvcache_cpu(&kp);
    }
    check_status(op, status);
    return c.o;
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

// Private to tests and tools (torch_flashattn._testing.overrides): the fields of fa_overrides in
// their order in fa.h, zero = automatic.
constexpr int kOverrideFields = sizeof(fa_overrides) / sizeof(int);

void set_overrides(c10::IntArrayRef fields)
{
    FA_CHECK(static_cast<int>(fields.size()) == kOverrideFields, "fa._set_overrides: expected %d fields, got %d",
             kOverrideFields, static_cast<int>(fields.size()));
    int values[kOverrideFields];
    for (int i = 0; i < kOverrideFields; i++)
        values[i] = static_cast<int>(fields[i]);
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

TORCH_LIBRARY(fa, m)
{
    m.def("forward(Tensor q, Tensor k, Tensor v, float? scale=None, bool causal=False) -> Tensor");
    m.def("forward_lse(Tensor q, Tensor k, Tensor v, float? scale=None, bool causal=False) -> (Tensor, Tensor)");
    m.def("naive_forward(Tensor q, Tensor k, Tensor v, float? scale=None, bool causal=False) -> Tensor");
    m.def("forward_kvcache(Tensor q, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor? cache_seqlens=None, "
          "Tensor? k_new=None, Tensor? v_new=None, float? scale=None, bool causal=False) -> Tensor");
    m.def("_set_overrides(int[] fields) -> ()", &set_overrides);
    m.def("_get_overrides() -> int[]", &get_overrides);
}

TORCH_LIBRARY_IMPL(fa, CPU, m)
{
    m.impl("forward", &forward);
    m.impl("forward_lse", &forward_lse);
    m.impl("forward_kvcache", &forward_kvcache);
}

#ifdef FA_WITH_CUDA
TORCH_LIBRARY_IMPL(fa, CUDA, m)
{
    m.impl("forward", &forward);
    m.impl("forward_lse", &forward_lse);
    m.impl("naive_forward", &naive_forward);
    m.impl("forward_kvcache", &forward_kvcache);
}
#endif

// `import torch_flashattn._C` loads this library, which runs the registrations above.
extern "C" PyObject *PyInit__C(void)
{
    static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", "torch-flashattn ops (torch.ops.fa)", -1, nullptr};
    return PyModule_Create(&module);
}
