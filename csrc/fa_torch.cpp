// fa_torch.cpp — the one file that touches torch: registers the fa:: ops.
//
//   fa::forward(Tensor q, Tensor k, Tensor v, float? scale=None, bool causal=False) -> Tensor
//   fa::forward_lse(...same...) -> (Tensor out, Tensor lse)
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
#include <cstring>
#include <optional>
#include <tuple>

#ifdef FA_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "fa.h"

namespace {

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
        TORCH_CHECK(t->dim() == 4, op, ": ", name, " must be a 4-D tensor (B, H, N, d), got ", t->dim(),
                    "-D with shape ", t->sizes());
    for (const auto &[name, t] : args) {
        TORCH_CHECK(t->device() == q.device(), op, ": q, k and v must be on the same device, got q on ",
                    q.device(), " and ", name, " on ", t->device());
        TORCH_CHECK(t->scalar_type() == q.scalar_type(), op, ": q, k and v must have the same dtype, got q ",
                    q.scalar_type(), " and ", name, " ", t->scalar_type());
    }
    const auto dt = q.scalar_type();
    TORCH_CHECK(dt == at::kFloat || dt == at::kHalf || dt == at::kBFloat16, op,
                ": q, k and v must be float32, float16 or bfloat16, got ", dt);
    TORCH_CHECK(q.device().is_cpu() || q.device().is_cuda(), op,
                ": q, k and v must be CPU or CUDA tensors, got ", q.device());

    TORCH_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0), op,
                ": batch size B must match, got q ", q.sizes(), ", k ", k.sizes(), ", v ", v.sizes());
    TORCH_CHECK(k.size(3) == q.size(3) && v.size(3) == q.size(3), op,
                ": head dim d (last dimension) must match, got q ", q.sizes(), ", k ", k.sizes(), ", v ", v.sizes());
    TORCH_CHECK(v.size(2) == k.size(2), op, ": k and v must have the same sequence length Nk, got k ", k.sizes(),
                ", v ", v.sizes());
    TORCH_CHECK(v.size(1) == k.size(1), op, ": k and v must have the same number of heads Hkv, got k ", k.sizes(),
                ", v ", v.sizes());
    const int64_t Hq = q.size(1), Hkv = k.size(1), d = q.size(3);
    TORCH_CHECK(Hq == 0 || (Hkv >= 1 && Hq % Hkv == 0), op, ": the number of query heads Hq = ", Hq,
                " must be a multiple of the number of key/value heads Hkv = ", Hkv);
    TORCH_CHECK(d >= 1 && d <= FA_MAX_HEAD_DIM, op, ": head dim d must be in 1..", FA_MAX_HEAD_DIM, ", got ", d);
    TORCH_CHECK(!scale.has_value() || std::isfinite(*scale), op, ": scale must be a finite number, got ",
                scale.value_or(0.0));
}

// The kernels need the last dimension contiguous; batch/head/row strides are free.
at::Tensor last_dim_contiguous(const at::Tensor &t)
{
    return t.stride(3) == 1 || t.size(3) == 1 ? t : t.contiguous();
}

std::tuple<at::Tensor, at::Tensor> run(const char *op, const at::Tensor &q_in, const at::Tensor &k_in,
                                       const at::Tensor &v_in, std::optional<double> scale, bool causal,
                                       bool want_lse)
{
    check_inputs(op, q_in, k_in, v_in, scale);
    const at::Tensor q = last_dim_contiguous(q_in), k = last_dim_contiguous(k_in), v = last_dim_contiguous(v_in);
    const int64_t B = q.size(0), Hq = q.size(1), Nq = q.size(2), d = q.size(3);
    at::Tensor o = at::empty({B, Hq, Nq, d}, q.options());
    at::Tensor lse = want_lse ? at::empty({B, Hq, Nq}, q.options().dtype(at::kFloat)) : at::Tensor();

    fa_params p;
    std::memset(&p, 0, sizeof(p));
    p.q = q.data_ptr();
    p.k = k.data_ptr();
    p.v = v.data_ptr();
    p.o = o.data_ptr();
    p.lse = want_lse ? lse.data_ptr<float>() : nullptr;
    p.q_batch_stride = q.stride(0); p.q_head_stride = q.stride(1); p.q_row_stride = q.stride(2);
    p.k_batch_stride = k.stride(0); p.k_head_stride = k.stride(1); p.k_row_stride = k.stride(2);
    p.v_batch_stride = v.stride(0); p.v_head_stride = v.stride(1); p.v_row_stride = v.stride(2);
    p.o_batch_stride = o.stride(0); p.o_head_stride = o.stride(1); p.o_row_stride = o.stride(2);
    p.B = B; p.Hq = Hq; p.Hkv = k.size(1); p.Nq = Nq; p.Nk = k.size(2); p.d = d;
    p.scale = static_cast<float>(scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(d)));
    p.causal = causal ? 1 : 0;
    p.dtype = to_fa_dtype(q.scalar_type());
    p.num_threads = at::get_num_threads();

    int status;
    if (q.is_cuda()) {
#ifdef FA_WITH_CUDA
        const c10::cuda::CUDAGuard guard(q.device());
        status = fa_forward_cuda(&p, c10::cuda::getCurrentCUDAStream().stream());
#else
        status = FA_ERR_NO_CUDA;
#endif
    } else {
        status = fa_forward_cpu(&p);
    }
    TORCH_CHECK(status == FA_OK, op, ": ", fa_strerror(status), " (status ", status, ")");
    return {o, lse};
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

}  // namespace

TORCH_LIBRARY(fa, m)
{
    m.def("forward(Tensor q, Tensor k, Tensor v, float? scale=None, bool causal=False) -> Tensor");
    m.def("forward_lse(Tensor q, Tensor k, Tensor v, float? scale=None, bool causal=False) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(fa, CPU, m)
{
    m.impl("forward", &forward);
    m.impl("forward_lse", &forward_lse);
}

#ifdef FA_WITH_CUDA
TORCH_LIBRARY_IMPL(fa, CUDA, m)
{
    m.impl("forward", &forward);
    m.impl("forward_lse", &forward_lse);
}
#endif

// `import torch_flashattn._C` loads this library, which runs the registrations above.
extern "C" PyObject *PyInit__C(void)
{
    static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", "torch-flashattn ops (torch.ops.fa)", -1, nullptr};
    return PyModule_Create(&module);
}
