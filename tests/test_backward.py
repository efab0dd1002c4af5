"""The backward pass (fa::backward, fa::backward_varlen and the autograd formulas of fa::forward,
forward_lse, forward_variants and forward_varlen).

Gradients of q, k, v (and sinks) are checked against autograd through test_variants'
float64 reference, by FlashAttention's rule: our error is at most 2 × PyTorch's own error (autograd
through the same reference computed as SDPA computes in the inputs' dtype) plus a slack. Over the
CPU backend, the exact path CUDA takes ("cpu-exact") and CUDA (gpu): plain, causal in both
alignments, window, softcap, ALiBi, sinks, key_mask, attn_mask, everything at once, GQA, a loss that
uses lse, strided views; opcheck of the autograd registration and torch.compile(fullgraph=True) of
forward + backward; the arguments that get no gradient raise; packed sequences (attention_varlen)
over the same devices, and opcheck of its autograd registration. The sinks' gradient, one sum per
head over every row, is held to the rule plus the dtype's rounding of that sum, and so are dq and dk
from the CUDA kernel, whose D reads the output rounded to the dtype (check_grads).
"""
import pytest
import torch

import torch_flashattn
from conftest import DEVICES, SLACK
from test_variants import make_qkv, pytorch_like, seed_of, use_vdevice, variant_kwargs, variant_reference

VDEVICES = DEVICES + ["cpu-exact"]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Gradients sum over Nq or Nk terms of products: a slack ten times the forward's.
GRAD_SLACK = {dt: 10 * s for dt, s in SLACK.items()}
CASES = ["plain", "causal_top_left", "causal_bottom_right", "window", "window_left_causal_bottom_right",
         "softcap_causal", "alibi_heads_causal", "sinks", "sinks_causal_window", "key_mask_bool",
         "attn_mask_bool_full", "attn_mask_float_B11K"]


@pytest.fixture(autouse=True)
def _plain_path_after_each_test():
    yield
    torch.ops.fa._set_exact(False)


def case_kwargs(case, g, B, Hq, Nq, Nk, dtype, device):
    return {} if case == "plain" else variant_kwargs(case, g, B, Hq, Nq, Nk, dtype, device)


def grads_of(fn, q, k, v, variants, g_out, g_lse):
    """Gradients of Σ out·g_out (+ Σ lse·g_lse) with respect to q, k, v and sinks (when given)."""
    leaves = [q, k, v] + ([variants["sinks"]] if variants.get("sinks") is not None else [])
    out, lse = fn(q, k, v, **variants)
    loss = (out.double() * g_out).sum()
    if g_lse is not None:
        loss = loss + (lse.double() * g_lse).sum()
    return torch.autograd.grad(loss, leaves)


def leaf(t, dtype=None):
    return t.detach().to(dtype or t.dtype).requires_grad_(True)


def check_grads(q, k, v, variants, use_lse, what):
    """Our gradients (torch_flashattn.attention_lse) against float64 autograd, by the rule."""
    dtype = q.dtype
    g = torch.Generator().manual_seed(5)
    g_out = torch.randn(q.shape, generator=g, dtype=torch.float64)
    g_lse = torch.randn(q.shape[:3], generator=g, dtype=torch.float64) if use_lse else None

    def with_sinks(vs, dt):
        vs = dict(vs)
        if vs.get("sinks") is not None:
            vs["sinks"] = leaf(vs["sinks"].cpu(), dt)
        return vs

    cpu = {n: t.cpu() if isinstance(t, torch.Tensor) else t for n, t in variants.items()}
    ref = grads_of(lambda *a, **kw: variant_reference(*a, **kw), leaf(q.cpu(), torch.float64),
                   leaf(k.cpu(), torch.float64), leaf(v.cpu(), torch.float64), with_sinks(cpu, torch.float64),
                   g_out, g_lse)
    pt = grads_of(pytorch_like, leaf(q.cpu()), leaf(k.cpu()), leaf(v.cpu()), with_sinks(cpu, torch.float32),
                  g_out, g_lse)
    ours_vars = dict(variants)
    if ours_vars.get("sinks") is not None:
        ours_vars["sinks"] = leaf(ours_vars["sinks"])
    ours = grads_of(torch_flashattn.attention_lse, leaf(q), leaf(k), leaf(v), ours_vars,
                    g_out.to(q.device), None if g_lse is None else g_lse.to(q.device))
    kernel_d = q.is_cuda and dtype != torch.float32     # the CUDA kernel: D from the rounded output
    if kernel_d and variants.get("sinks") is not None:
        # The sinks' gradient is −Σ_i exp(sink − lse_i) D_i; the kernel's D_i reads our output O_i rounded
        # to the dtype, which shifts it by exactly −Σ_i exp(sink − lse_i) dO_i · (O_i − O64_i).
        with torch.no_grad():
            out64, lse64 = variant_reference(q.cpu().double(), k.cpu().double(), v.cpu().double(),
                                             **with_sinks(cpu, torch.float64))
            out_ours = torch_flashattn.attention_lse(q, k, v, **variants)[0].cpu().double()
            w = torch.exp(cpu["sinks"].double().view(1, -1, 1) - lse64)
            d_shift = (w * (g_out * (out_ours - out64)).sum(-1)).sum((0, 2)).abs()
    for name, a, r, p in zip(("dq", "dk", "dv", "dsinks"), ours, ref, pt):
        assert a.shape == r.shape, (what, name)
        assert torch.isfinite(a).all(), f"{what}: {name} not finite"
        err = (a.double().cpu() - r).abs().max().item()
        err_pt = (p.double() - r).abs().max().item()
        bound = 2 * err_pt + GRAD_SLACK[dtype]
        if name == "dsinks":
            # One number per head summed over every row: PyTorch's own error there is sometimes tiny
            # by cancellation (ours was 0.2-0.4 × PyTorch's at the median over 240 draws, up to 12 ×
            # in the tail), so the bound adds the dtype's rounding of the sum itself.
            bound += torch.finfo(dtype).eps * r.abs().max().item()
        if name == "dsinks" and kernel_d:
            bound += d_shift.max().item()
        if name in ("dq", "dk") and kernel_d:
            # The CUDA kernel's D = rowsum(dO ∘ O) reads the forward's output rounded to the dtype (as
            # FlashAttention-2/3 do), where PyTorch's D is Σ P dP: that rounding reaches dq and dk once, at
            # their scale (alone it put fp16 cases with one query over the bare rule: 4.4e-4 against 3.9e-4).
            bound += torch.finfo(dtype).eps * r.abs().max().item()
        if name == "dv" and kernel_d:
            # dV = Pᵀ dO with P rounded to the dtype (FlashAttention's P V product) and dv rounded once at the
            # end: one unit of the dtype at dv's scale, as FlashAttention's own tests allow (their bound adds
            # twice the dtype's rounding at the gradient's scale). Alone, both CUDA kernels put bf16, 1000
            # queries × 1100 keys, d = 64 over the bare rule: 3.05e-3 against 2.88e-3 (PyTorch's 1.39e-3).
            bound += torch.finfo(dtype).eps * r.abs().max().item()
        assert err <= bound, f"{what}: {name} error {err:.3e} > 2 × PyTorch's {err_pt:.3e} + slack = {bound:.3e}"


@pytest.mark.parametrize("device", VDEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(2, 4, 2, 37, 53, 32), (1, 2, 1, 64, 24, 64), (2, 2, 2, 1, 40, 40)],
                         ids=lambda s: "B{}-H{}-{}-Nq{}-Nk{}-d{}".format(*s))
@pytest.mark.parametrize("case", CASES)
def test_gradients(device, dtype, shape, case):
    device = use_vdevice(device)
    B, Hq, Hkv, Nq, Nk, d = shape
    g = torch.Generator().manual_seed(seed_of(case, shape))
    q, k, v = make_qkv(g, B, Hq, Hkv, Nq, Nk, d, dtype, device)
    variants = case_kwargs(case, g, B, Hq, Nq, Nk, dtype, device)
    check_grads(q, k, v, variants, use_lse=False, what=f"{case} {dtype} {shape}")


@pytest.mark.parametrize("device", VDEVICES)
@pytest.mark.parametrize("case", ["plain", "causal_top_left", "sinks_causal_window", "softcap_causal"])
def test_gradients_through_lse(device, case):
    """A loss that uses lse too: dS gains P · dlse (and the sinks' gradient dlse's share)."""
    device = use_vdevice(device)
    g = torch.Generator().manual_seed(7)
    q, k, v = make_qkv(g, 2, 4, 2, 29, 41, 32, torch.float32, device)
    check_grads(q, k, v, case_kwargs(case, g, 2, 4, 29, 41, torch.float32, device), use_lse=True, what=case)


@pytest.mark.parametrize("device", VDEVICES)
def test_everything_at_once_on_views(device):
    device = use_vdevice(device)
    g = torch.Generator().manual_seed(8)
    q, k, v = make_qkv(g, 2, 4, 2, 33, 45, 40, torch.float32, device, layout="bnhd")
    variants = dict(causal=True, causal_align="bottom_right", window=(20, -1), softcap=4.0,
                    alibi_slopes=torch.rand(2, 4, generator=g).to(device) * 0.2,
                    sinks=torch.randn(4, generator=g).to(device), key_mask=(torch.rand(2, 45, generator=g) < 0.8).to(device),
                    attn_mask=torch.randn(1, 4, 33, 45, generator=g).to(device))
    check_grads(q, k, v, variants, use_lse=True, what="all")


@pytest.mark.parametrize("device", VDEVICES)
@pytest.mark.parametrize("causal", [False, True])
def test_plain_ops_match_sdpa_gradients(device, causal):
    """attention / fa::forward (lse recomputed in its backward) against SDPA's own autograd, fp32."""
    device = use_vdevice(device)
    g = torch.Generator().manual_seed(9)
    q, k, v = make_qkv(g, 2, 4, 2, 50, 70, 32, torch.float32, device)
    a = [leaf(t) for t in (q, k, v)]
    b = [leaf(t.double()) for t in (q, k, v)]
    torch_flashattn.attention(*a, causal=causal).sum().backward()
    torch.nn.functional.scaled_dot_product_attention(*b, is_causal=causal, enable_gqa=True).sum().backward()
    for x, y in zip(a, b):
        torch.testing.assert_close(x.grad.double(), y.grad, atol=2e-5, rtol=0)


@pytest.mark.parametrize("device", VDEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(0, 2, 2, 8, 8), (2, 0, 0, 8, 8), (2, 0, 2, 8, 8), (2, 2, 2, 0, 8),
                                   (2, 2, 2, 8, 0), (2, 2, 2, 0, 0)], ids=lambda s: "B{}-Hq{}-Hkv{}-Nq{}-Nk{}".format(*s))
def test_gradients_of_empty_problems(device, dtype, shape):
    """An empty batch, no heads (Hq = Hkv = 0, or Hq = 0 beside kv heads), no queries or no keys: SDPA
    math's gradients (zeros where the tensor has elements; the sinks' through lse where there are
    queries). The CUDA backward once divided by Hkv = 0 on the host, or asked for a workspace it sized
    at 0 bytes."""
    device = use_vdevice(device)
    B, Hq, Hkv, Nq, Nk = shape
    g = torch.Generator().manual_seed(15)
    q = torch.randn(B, Hq, Nq, 64, generator=g).to(device, dtype)
    k, v = (torch.randn(B, Hkv, Nk, 64, generator=g).to(device, dtype) for _ in range(2))
    for kw in ({}, {"causal": True}, {"sinks": torch.randn(Hq, generator=g).to(device)}):
        ours = [leaf(t) for t in (q, k, v)]
        ref = [leaf(t.cpu().double()) for t in (q, k, v)]
        kw_ours = {n: leaf(t) if n == "sinks" else t for n, t in kw.items()}
        kw_ref = {n: leaf(t.cpu().double()) if n == "sinks" else t for n, t in kw.items()}
        out, lse = torch_flashattn.attention_lse(*ours, **kw_ours)
        loss = out.double().sum() + lse.double().sum()
        sinks_ours, sinks_ref = ([kw_ours["sinks"]], [kw_ref["sinks"]]) if "sinks" in kw else ([], [])
        got = torch.autograd.grad(loss, ours + sinks_ours, allow_unused=True)
        out_r, lse_r = variant_reference(*ref, **kw_ref)
        want = torch.autograd.grad(out_r.sum() + lse_r.sum(), ref + sinks_ref, allow_unused=True)
        for name, a, r, t in zip(("dq", "dk", "dv", "dsinks"), got, want, ours + sinks_ours):
            r = torch.zeros(t.shape, dtype=torch.float64) if r is None else r
            assert a is not None and a.shape == t.shape, f"{shape} {kw}: {name}"
            torch.testing.assert_close(a.cpu().double(), r, rtol=0, atol=0, msg=f"{shape} {kw}: {name}")


@pytest.mark.parametrize("device", VDEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("heads", [(0, 0), (0, 2)], ids=["Hq0-Hkv0", "Hq0-Hkv2"])
def test_varlen_gradients_without_query_heads(device, dtype, heads):
    """Packed sequences with no query head: an empty dq, zero dk and dv."""
    from test_variants import cu
    device = use_vdevice(device)
    Hq, Hkv = heads
    g = torch.Generator().manual_seed(16)
    q = leaf(torch.randn(5, Hq, 64, generator=g).to(device, dtype))
    k, v = (leaf(torch.randn(6, Hkv, 64, generator=g).to(device, dtype)) for _ in range(2))
    out = torch_flashattn.attention_varlen(q, k, v, cu([2, 3], device), cu([4, 2], device), 3, 4)
    dq, dk, dv = torch.autograd.grad(out.float().sum(), (q, k, v))
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    assert (dk == 0).all() and (dv == 0).all()


def test_forward_mode_ad_raises():
    """No forward-mode formula: a tangent on any tensor argument raises, under torch.autograd.forward_ad
    and under torch.func.jvp (the tangent was once dropped: a zero jvp, or none)."""
    import torch.autograd.forward_ad as fwAD
    from test_variants import cu
    g = torch.Generator().manual_seed(17)
    q, k, v = make_qkv(g, 1, 2, 1, 6, 9, 16, torch.float32, "cpu")
    sinks = torch.randn(2, generator=g)
    calls = {
        "fa.forward": lambda q, s: torch_flashattn.attention(q, k, v),
        "fa.forward_lse": lambda q, s: torch_flashattn.attention_lse(q, k, v)[0],
        "fa.forward_variants": lambda q, s: torch_flashattn.attention(q, k, v, window=(2, 1), sinks=s),
        "fa.forward_varlen": lambda q, s: torch_flashattn.attention_varlen(
            q[0].transpose(0, 1), k[0].transpose(0, 1), v[0].transpose(0, 1), cu([2, 4], "cpu"), cu([4, 5], "cpu"), 4, 5,
            sinks=s),
        "fa.forward_kvcache": lambda q, s: torch_flashattn.attention_kvcache(q, k.clone(), v.clone(), sinks=s),
    }
    for op, fn in calls.items():
        for which in ("q", "sinks"):
            primal = q if which == "q" else sinks
            call = (lambda x: fn(x, sinks)) if which == "q" else (lambda x: fn(q, x))
            if op in ("fa.forward", "fa.forward_lse") and which == "sinks":
                continue
            with pytest.raises(RuntimeError, match=f"{op}: (forward-mode AD \\(jvp\\) is not implemented; "
                                                   "|torch.func.grad, jacrev and jvp are not supported)"):
                torch.func.jvp(call, (primal,), (torch.ones_like(primal),))
            with fwAD.dual_level(), pytest.raises(RuntimeError, match=f"{op}: forward-mode AD"):
                call(fwAD.make_dual(primal, torch.ones_like(primal)))


def test_torch_func_grad_raises_and_vmap_runs():
    """torch.func.grad (and jacrev) cannot run the autograd registration: a clear error naming the op
    (torch's own named no op); vmap runs, with SDPA's answer."""
    g = torch.Generator().manual_seed(18)
    q, k, v = make_qkv(g, 3, 2, 1, 6, 9, 16, torch.float32, "cpu")
    for op, fn in (("fa.forward_lse", lambda q: torch_flashattn.attention(q, k, v).sum()),
                   ("fa.forward_variants", lambda q: torch_flashattn.attention(q, k, v, window=(2, 1)).sum())):
        for transform in (torch.func.grad, torch.func.jacrev):
            with pytest.raises(RuntimeError, match=f"{op}: torch.func.grad, jacrev and jvp are not supported"):
                transform(fn)(q)
    q5, k5, v5 = (t[:, None] for t in (q, k, v))       # a vmapped dim before (B, H, N, d)
    out = torch.func.vmap(lambda q, k, v: torch_flashattn.attention(q, k, v, causal=True))(q5, k5, v5)
    torch.testing.assert_close(out[:, 0], torch.nn.functional.scaled_dot_product_attention(
        q, k.expand(3, 2, 9, 16), v.expand(3, 2, 9, 16), is_causal=True))


def test_no_gradient_for_masks_and_slopes():
    g = torch.Generator().manual_seed(10)
    q, k, v = (leaf(t) for t in make_qkv(g, 1, 2, 2, 8, 8, 16, torch.float32, "cpu"))
    with pytest.raises(RuntimeError, match="attn_mask"):
        torch_flashattn.attention(q, k, v, attn_mask=torch.randn(8, 8, requires_grad=True))
    with pytest.raises(RuntimeError, match="alibi_slopes"):
        torch_flashattn.attention(q, k, v, alibi_slopes=torch.rand(2, requires_grad=True))


@pytest.mark.parametrize("device", VDEVICES)
def test_double_backward_raises(device):
    """A second derivative is not computed: it raises (autograd once took the gradients for constants
    and returned zeros). A first derivative with create_graph=True still works."""
    device = use_vdevice(device)
    g = torch.Generator().manual_seed(14)
    q, k, v = (leaf(t) for t in make_qkv(g, 1, 2, 1, 6, 9, 16, torch.float32, device))
    for what, fn in (("fa.backward", lambda: torch_flashattn.attention(q, k, v, causal=True)),
                     ("fa.backward", lambda: torch_flashattn.attention(q, k, v, window=(1, 1))),
                     ("fa.backward", lambda: torch.ops.fa.forward(q, k, v, None, False)),
                     ("fa.backward_varlen", lambda: torch_flashattn.attention_varlen(
                         q[0].transpose(0, 1), k[0].transpose(0, 1), v[0].transpose(0, 1),
                         torch.tensor([0, 2, 6], dtype=torch.int32, device=device),
                         torch.tensor([0, 4, 9], dtype=torch.int32, device=device), 4, 5))):
        (gq,) = torch.autograd.grad(fn().sum(), q, create_graph=True)
        assert gq.grad_fn is not None
        with pytest.raises(RuntimeError, match=f"{what}: a gradient of the gradients \\(double backward\\) "
                                               "is not implemented"):
            torch.autograd.grad((gq ** 2).sum(), k)


@pytest.mark.parametrize("device", VDEVICES)
def test_opcheck_autograd(device):
    """opcheck's autograd_registration and aot_dispatch tests over the three registered ops."""
    device = use_vdevice(device)
    g = torch.Generator().manual_seed(11)
    q, k, v = (leaf(t) for t in make_qkv(g, 2, 4, 2, 13, 21, 16, torch.float32, device))
    sinks = leaf(torch.randn(4, generator=g).to(device))
    torch.library.opcheck(torch.ops.fa.forward.default, (q, k, v, None, True))
    torch.library.opcheck(torch.ops.fa.forward_lse.default, (q, k, v, 0.3, False))
    torch.library.opcheck(torch.ops.fa.forward_variants.default,
                          (q, k, v, None, True, 1, 6, -1, 3.0, None, sinks,
                           (torch.rand(2, 21, generator=g) < 0.8).to(device), None))
    out, lse = torch_flashattn.attention_lse(q.detach(), k.detach(), v.detach())
    torch.library.opcheck(torch.ops.fa.backward.default, (torch.randn_like(out), q.detach(), k.detach(), v.detach(),
                                                          out, lse, None, None, False))


@pytest.mark.parametrize("device", VDEVICES)
def test_compile_forward_and_backward(device):
    device = use_vdevice(device)
    g = torch.Generator().manual_seed(12)
    q, k, v = make_qkv(g, 2, 4, 2, 24, 24, 16, torch.float32, device)
    sinks = torch.randn(4, generator=g).to(device)

    def step(q, k, v, sinks):
        return (torch_flashattn.attention(q, k, v, causal=True, sinks=sinks, window=(8, -1)) ** 2).sum()

    a = [leaf(t) for t in (q, k, v, sinks)]
    b = [leaf(t) for t in (q, k, v, sinks)]
    step(*a).backward()
    torch.compile(step, fullgraph=True)(*b).backward()
    for x, y in zip(a, b):
        torch.testing.assert_close(y.grad, x.grad, atol=1e-5, rtol=1e-5)


def test_gqa_gradients_sum_over_the_group():
    """dK, dV of a kv head are the sums over its query heads: the same as with the heads repeated."""
    g = torch.Generator().manual_seed(13)
    q, k, v = make_qkv(g, 1, 6, 2, 20, 30, 16, torch.float32, "cpu")
    a = [leaf(t) for t in (q, k, v)]
    b = [leaf(q), leaf(k.repeat_interleave(3, 1)), leaf(v.repeat_interleave(3, 1))]
    torch_flashattn.attention(*a, causal=True).sum().backward()
    torch_flashattn.attention(*b, causal=True).sum().backward()
    torch.testing.assert_close(a[1].grad, b[1].grad.view(1, 2, 3, 30, 16).sum(2), atol=1e-5, rtol=0)
    torch.testing.assert_close(a[2].grad, b[2].grad.view(1, 2, 3, 30, 16).sum(2), atol=1e-5, rtol=0)


# ---- packed sequences (fa::backward_varlen) -----------------------------------------------------

VARLEN_GRAD_CASES = {
    "plain": lambda Hq, g: dict(),
    "causal_bottom_right": lambda Hq, g: dict(causal=True, causal_align="bottom_right"),
    "window_softcap_sinks": lambda Hq, g: dict(window=(6, 2), softcap=3.0, sinks=torch.randn(Hq, generator=g)),
}


@pytest.mark.parametrize("device", VDEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", list(VARLEN_GRAD_CASES))
@pytest.mark.parametrize("use_lse", [False, True], ids=["out", "out_and_lse"])
def test_varlen_gradients(device, dtype, case, use_lse):
    """attention_varlen's gradients (dq, dk, dv, dsinks) against float64 autograd through each sequence
    alone, by the rule; rows of q, k and v outside every sequence get zero gradients."""
    device = use_vdevice(device)
    g = torch.Generator().manual_seed(seed_of("varlen grad", case, use_lse))
    # Nq_b < Nk_b, one query, equal, Nq_b > Nk_b
    check_varlen_grads(g, device, dtype, VARLEN_GRAD_CASES[case](4, g), [9, 1, 17, 4], [13, 6, 17, 2], 4, 2, 24,
                       use_lse, f"varlen {case} {dtype} lse={use_lse}")


def check_varlen_grads(g, device, dtype, variants, lens_q, lens_k, Hq, Hkv, d, use_lse, what):
    """check_grads for attention_varlen over sequences of lens_q queries and lens_k keys, packed with
    3 rows of q and 2 of k and v past the last sequence (whose gradients must be 0)."""
    from test_variants import cu, varlen_reference
    q = torch.randn(sum(lens_q) + 3, Hq, d, generator=g).to(dtype)
    k, v = (torch.randn(sum(lens_k) + 2, Hkv, d, generator=g).to(dtype) for _ in range(2))
    g_out = torch.randn(q.shape, generator=g, dtype=torch.float64)
    g_lse = torch.randn(Hq, q.shape[0], generator=g, dtype=torch.float64) if use_lse else None
    nq, nk = sum(lens_q), sum(lens_k)

    def grads(fn, dt, dev):
        leaves = [leaf(t.to(dev), dt) for t in (q, k, v)]
        kw = dict(variants)
        for name in ("sinks", "alibi_slopes"):
            if kw.get(name) is not None:
                kw[name] = kw[name].to(dev, torch.float64 if dt == torch.float64 else torch.float32)
        if kw.get("sinks") is not None:
            kw["sinks"] = leaf(kw["sinks"])
            leaves.append(kw["sinks"])
        out, lse = fn(*leaves[:3], kw)
        loss = (out[:nq].double() * g_out[:nq].to(dev)).sum()
        if g_lse is not None:
            loss = loss + (lse[:, :nq].double() * g_lse[:, :nq].to(dev)).sum()
        return torch.autograd.grad(loss, leaves)

    def reference(qq, kk, vv, kw, as_pytorch=False):
        out, lse = varlen_reference(qq[:nq], kk[:nk], vv[:nk], lens_q, lens_k, as_pytorch=as_pytorch, **kw)
        return out, lse

    ref = grads(reference, torch.float64, "cpu")
    pt = grads(lambda a, b, c, kw: reference(a, b, c, kw, as_pytorch=True), None, "cpu")
    ours = grads(lambda a, b, c, kw: torch_flashattn.attention_varlen(
        a, b, c, cu(lens_q, device), cu(lens_k, device), max(lens_q), max(lens_k), return_lse=True, **kw),
        None, device)
    kernel_d = device.startswith("cuda") and dtype != torch.float32
    d_shift = 0.0
    if kernel_d and variants.get("sinks") is not None:      # as in check_grads: D from the rounded output
        with torch.no_grad():
            kw64 = {n: t.double() if isinstance(t, torch.Tensor) else t for n, t in variants.items()}
            out64, lse64 = reference(q.double(), k.double(), v.double(), kw64)
            kw = {n: t.to(device, torch.float32) if isinstance(t, torch.Tensor) else t for n, t in variants.items()}
            out_ours = torch_flashattn.attention_varlen(
                q.to(device), k.to(device), v.to(device), cu(lens_q, device), cu(lens_k, device), max(lens_q),
                max(lens_k), **kw)[:nq].cpu().double()
            w = torch.exp(kw64["sinks"].view(-1, 1) - lse64[:, :nq])                  # (Hq, nq)
            d_shift = (w * (g_out[:nq] * (out_ours - out64[:nq])).sum(-1).T).sum(1).abs().max().item()
    for name, a, r, p in zip(("dq", "dk", "dv", "dsinks"), ours, ref, pt):
        a = a.double().cpu()
        if name in ("dq", "dk", "dv"):
            n = nq if name == "dq" else nk
            assert (a[n:] == 0).all(), f"{what}: {name} rows outside every sequence are not 0"
            a, r, p = a[:n], r[:n], p[:n]
        assert torch.isfinite(a).all(), f"{what}: {name} not finite"
        err, err_pt = (a - r).abs().max().item(), (p.double() - r).abs().max().item()
        bound = 2 * err_pt + GRAD_SLACK[dtype]
        if name == "dsinks" or (kernel_d and name in ("dq", "dk")):
            bound += torch.finfo(dtype).eps * r.abs().max().item()   # as in check_grads
        if name == "dsinks":
            bound += d_shift
        assert err <= bound, f"{what}: {name} error {err:.3e} > 2 × PyTorch's {err_pt:.3e} + slack = {bound:.3e}"


@pytest.mark.parametrize("device", VDEVICES)
def test_opcheck_varlen_autograd(device):
    from test_variants import cu
    device = use_vdevice(device)
    g = torch.Generator().manual_seed(9)
    q = torch.randn(7, 2, 16, generator=g).to(device).requires_grad_(True)
    k, v = (torch.randn(9, 1, 16, generator=g).to(device).requires_grad_(True) for _ in range(2))
    args = (q, k, v, cu([3, 4], device), cu([5, 4], device), 4, 5, None, True, 1, 3, -1, 2.0, None,
            torch.randn(2, generator=g).to(device).requires_grad_(True))
    torch.library.opcheck(torch.ops.fa.forward_varlen.default, args,
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


def test_cpu_gradients_are_the_same_bits_whatever_the_threads():
    """The C backend's gradients, the sinks' included, do not depend on the thread count: each
    (batch, kv head) is one thread's work, and the sinks' per-batch sums are added in order."""
    g = torch.Generator().manual_seed(11)
    q, k, v = make_qkv(g, 3, 4, 2, 70, 90, 32, torch.float32, "cpu")
    sinks = torch.randn(4, generator=g)
    d_out = torch.randn(q.shape, generator=g)
    threads = torch.get_num_threads()
    runs = []
    try:
        for n in (1, 3):
            torch.set_num_threads(n)
            leaves = [leaf(t) for t in (q, k, v, sinks)]
            out = torch_flashattn.attention(*leaves[:3], causal=True, sinks=leaves[3])
            runs.append(torch.autograd.grad((out * d_out).sum(), leaves))
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(*runs):
        assert torch.equal(a, b)
