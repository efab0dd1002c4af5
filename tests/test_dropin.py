"""The SDPA-compatible entry point, the scoped swap of F.scaled_dot_product_attention, and the
Hugging Face transformers backend (skipped when transformers is not installed)."""
import copy

import pytest
import torch
import torch.nn.functional as F

import torch_flashattn
from conftest import DEVICES, assert_accurate, randn


@pytest.fixture(autouse=True)
def fresh_stats():
    torch_flashattn.reset_stats()


@pytest.fixture
def no_amx(monkeypatch):
    """The CPU taken as one without AMX-BF16, whatever this machine has: bf16 calls on our kernels."""
    monkeypatch.setattr(torch_flashattn.sdpa, "_cpu_amx_bf16", lambda: False)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_signature_runs_fa(device, causal):
    torch.manual_seed(0)
    q, k, v = randn(2, 4, 50, 32, device=device), randn(2, 2, 50, 32, device=device), randn(2, 2, 50, 32, device=device)
    out = torch_flashattn.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=0.3, enable_gqa=True)
    assert_accurate(out, q, k, v, causal, 0.3, what="4-D GQA")
    q3, k3, v3 = q[:, 0], k[:, 0], v[:, 0]   # (B, L, E): one head
    out3 = torch_flashattn.scaled_dot_product_attention(q3, k3, v3, is_causal=causal)
    torch.testing.assert_close(out3, F.scaled_dot_product_attention(q3, k3, v3, is_causal=causal))
    assert torch_flashattn.stats() == {"fa": 2, "fa_decode": 0, "sdpa": 0, "eager": 0, "exact": 0, "fallback_reasons": {}}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("nq", [1, 3, 16])
def test_sdpa_decode_step_runs_kvcache(device, dtype, nq, no_amx):
    """A generation step (few queries, a longer run of keys, no causal mask) runs the split-KV
    decode kernel, also on the valid prefix of a preallocated cache (a strided view)."""
    torch.manual_seed(nq)
    cache_k, cache_v = (randn(2, 2, 4096, 64, device=device, dtype=dtype) for _ in range(2))
    q = randn(2, 8, nq, 64, device=device, dtype=dtype)
    for n_keys in (nq + 1, 777, 4096):
        k, v = cache_k[:, :, :n_keys], cache_v[:, :, :n_keys]
        out = torch_flashattn.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        assert_accurate(out, q, k, v, False, None, what=f"decode step Nq={nq} Nk={n_keys}")
    assert torch_flashattn.stats()["fa_decode"] == 3
    # Causal (SDPA's top-left mask), as many keys as queries, or a strided last dimension: fa::forward.
    kt = cache_k[:, :, :300].transpose(-1, -2).contiguous().transpose(-1, -2)
    for args, causal in (((q, cache_k[:, :, :40], cache_v[:, :, :40]), True),
                         ((q, cache_k[:, :, :nq], cache_v[:, :, :nq]), False),
                         ((q, kt, cache_v[:, :, :300]), False)):
        out = torch_flashattn.scaled_dot_product_attention(*args, is_causal=causal, enable_gqa=True)
        assert_accurate(out, *args, causal, None, what=f"not a decode step, Nk={args[1].shape[2]}")
    assert torch_flashattn.stats()["fa"] == 6 and torch_flashattn.stats()["fa_decode"] == 3


@pytest.mark.parametrize("device", DEVICES)
def test_sdpa_fallbacks_are_exact(device):
    """Calls the kernel does not cover go to PyTorch's SDPA, with the same result, and are counted."""
    torch.manual_seed(1)
    q, k, v = (randn(2, 4, 20, 16, device=device) for _ in range(3))
    mask = torch.rand(20, 20, device=device) > 0.3
    cases = {
        "attn_mask": dict(args=(q, k, v), kw=dict(attn_mask=mask)),
        "dtype torch.float64": dict(args=(q.double(), k.double(), v.double()), kw={}),
        "head dims differ or exceed 256": dict(args=(q, k, randn(2, 4, 20, 8, device=device)), kw={}),
        "not 3-D or 4-D": dict(args=(q[None], k[None], v[None]), kw={}),
        "scale past 2.3e38": dict(args=(q, k, v), kw=dict(scale=3e38)),   # our ops refuse it
    }
    for reason, c in cases.items():
        got = torch_flashattn.scaled_dot_product_attention(*c["args"], **c["kw"])
        torch.testing.assert_close(got, F.scaled_dot_product_attention(*c["args"], **c["kw"]),
                                   equal_nan=reason == "scale past 2.3e38")      # SDPA's own NaN there
        assert torch_flashattn.stats()["fallback_reasons"].get(reason) == 1, (reason, torch_flashattn.stats())
    # Dropout is random: same shape, and counted as a fallback.
    assert torch_flashattn.scaled_dot_product_attention(q, k, v, dropout_p=0.5).shape == q.shape
    # Inputs that need a gradient get one, through SDPA.
    qg = q.clone().requires_grad_()
    torch_flashattn.scaled_dot_product_attention(qg, k, v).sum().backward()
    assert qg.grad is not None
    with torch.no_grad():   # ... but not under no_grad
        torch_flashattn.scaled_dot_product_attention(qg, k, v)
    s = torch_flashattn.stats()
    grad_reason = ("requires_grad, few keys (SDPA's backward is faster)" if device == "cpu"
                   else "requires_grad (SDPA's backward is faster)")
    assert s["fallback_reasons"]["dropout_p > 0"] == 1 and s["fallback_reasons"][grad_reason] == 1
    assert s["fa"] == 1 and s["sdpa"] == 7           # the 5 cases, dropout, the gradient


@pytest.mark.parametrize("amx", [False, True])
def test_sdpa_bf16_on_an_amx_cpu(monkeypatch, amx):
    """On a CPU with AMX-BF16 (taken as present or absent here), bf16 calls go to SDPA's AMX kernel but
    for decoding steps and gradients up to CPU_AMX_GRAD_MAX_KEY_ELEMENTS key elements per head; fp32
    and fp16 calls, and every call without AMX, stay on ours. Each result is SDPA's by the accuracy rule."""
    from torch_flashattn import sdpa
    monkeypatch.setattr(sdpa, "_cpu_amx_bf16", lambda: amx)
    reason = "bf16 on an AMX CPU (SDPA's AMX kernel is faster)"
    grad_reason = "requires_grad, bf16 on an AMX CPU (SDPA's AMX kernel is faster)"
    g = torch.Generator().manual_seed(5)
    bf = dict(dtype=torch.bfloat16)
    q, k, v = (torch.randn(2, 4, 50, 32, generator=g).to(**bf) for _ in range(3))
    cases = [   # (args, kwargs, path with AMX)
        ((q, k, v), dict(is_causal=True), "sdpa"),                                    # prefill
        ((q[:, :, :1], k, v), {}, "fa_decode"),                                      # a generation step
        ((q[:, 0], k[:, 0], v[:, 0]), {}, "sdpa"),                                   # (B, L, E)
        (tuple(t.float() for t in (q, k, v)), {}, "fa"),
        (tuple(t.half() for t in (q, k, v)), dict(is_causal=True), "fa"),
    ]
    for args, kw, path in cases:
        torch_flashattn.reset_stats()
        out = torch_flashattn.scaled_dot_product_attention(*args, **kw)
        assert_accurate(out, *args, kw.get("is_causal", False), None, what=f"{args[0].dtype} {args[0].shape}")
        s = torch_flashattn.stats()
        want = path if amx or path == "fa_decode" else "fa"
        assert s[want] == 1 and s["sdpa"] == (want == "sdpa"), (args[0].shape, s)
        assert s["fallback_reasons"] == ({reason: 1} if want == "sdpa" else {}), s
    # Gradients: ours up to the threshold (50 · 32 key elements), SDPA's above it (600 · 32).
    big = tuple(torch.randn(1, 2, 600, 32, generator=g).to(**bf) for _ in range(3))
    for inputs, path in (((q, k, v), "fa"), (big, "sdpa" if amx else "fa")):
        torch_flashattn.reset_stats()
        leaves = [t.clone().requires_grad_() for t in inputs]
        torch_flashattn.scaled_dot_product_attention(*leaves, is_causal=True).float().square().sum().backward()
        ref = [t.clone().requires_grad_() for t in inputs]
        F.scaled_dot_product_attention(*ref, is_causal=True).float().square().sum().backward()
        for a, b in zip(leaves, ref):
            torch.testing.assert_close(a.grad.float(), b.grad.float(), atol=0.05, rtol=0.05)
        s = torch_flashattn.stats()
        assert s[path] == 1 and s["fallback_reasons"] == ({grad_reason: 1} if path == "sdpa" else {}), s


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kind", ["bool_padding", "float_bias", "float32_causal_band"])
def test_sdpa_attn_mask_runs_in_the_kernel(dtype, kind):
    """On compute capability 8.0+ an attn_mask call (fp16 / bf16) runs in a tensor-core kernel (the Hopper
    kernel on 9.0), counted as fa, with SDPA's result by the accuracy rule; elsewhere it falls back to
    SDPA."""
    from test_variants import assert_variant_accurate
    g = torch.Generator().manual_seed(3)
    B, H, L, S, E = 2, 4, 150, 300, 64
    q = torch.randn(B, H, L, E, generator=g).to("cuda", dtype)
    k, v = (torch.randn(B, 2, S, E, generator=g).to("cuda", dtype) for _ in range(2))
    if kind == "bool_padding":
        mask = (torch.arange(S)[None, None, None, :] < torch.tensor([S, 211])[:, None, None, None]).cuda()
    elif kind == "float_bias":
        mask = torch.randn(1, H, L, S, generator=g).to("cuda", dtype)
    else:
        i, j = torch.arange(L)[:, None] + S - L, torch.arange(S)[None, :]
        mask = torch.zeros(L, S).masked_fill((j > i) | (j < i - 60), float("-inf")).cuda()
    out = torch_flashattn.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    in_kernel = torch.cuda.get_device_capability() >= (8, 0)
    s = torch_flashattn.stats()
    assert (s["fa"], s["sdpa"], s["exact"]) == ((1, 0, 0) if in_kernel else (0, 1, 0)), s
    assert_variant_accurate(out, None, q, k, v, what=kind, attn_mask=mask)
    # Rows the kernel cannot load (head dim 33: 66-byte rows) go to SDPA, not to the exact path.
    torch_flashattn.reset_stats()
    q33, k33, v33 = (x[..., :33] for x in (q, k, v))
    out = torch_flashattn.scaled_dot_product_attention(q33, k33, v33, attn_mask=mask, enable_gqa=True)
    s = torch_flashattn.stats()
    assert (s["fa"], s["sdpa"], s["exact"]) == (0, 1, 0), s
    assert_variant_accurate(out, None, q33, k33, v33, what=kind + " d=33", attn_mask=mask)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["bool_padding", "float_bias"])
def test_sdpa_attn_mask_on_an_sm80_gpu(monkeypatch, fa_overrides, kind):
    """As an 8.6 GPU (its capability for the drop-in, fa_overrides.device_cc for the kernels) an
    attn_mask call runs the sm_80 kernel: counted as fa, not exact, and bit for bit that kernel's result."""
    from test_variants import assert_variant_accurate
    monkeypatch.setattr(torch_flashattn.sdpa, "_capability", lambda index: (8, 6))
    g = torch.Generator().manual_seed(5)
    B, H, L, S, E = 2, 4, 150, 300, 64
    q = torch.randn(B, H, L, E, generator=g).to("cuda", torch.bfloat16)
    k, v = (torch.randn(B, 2, S, E, generator=g).to("cuda", torch.bfloat16) for _ in range(2))
    if kind == "bool_padding":
        mask = (torch.arange(S)[None, None, None, :] < torch.tensor([S, 211])[:, None, None, None]).cuda()
    else:
        mask = torch.randn(1, H, L, S, generator=g).to("cuda", torch.bfloat16)
    fa_overrides(device_cc=86)
    torch_flashattn.reset_stats()
    out = torch_flashattn.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    s = torch_flashattn.stats()
    assert (s["fa"], s["sdpa"], s["exact"]) == (1, 0, 0), s
    assert_variant_accurate(out, None, q, k, v, what=kind, attn_mask=mask)
    fa_overrides(family="sm80")
    assert torch.equal(out, torch_flashattn.attention(q, k, v, attn_mask=mask))


def test_sdpa_errors_match_pytorch():
    q, k = randn(1, 4, 8, 16), randn(1, 2, 8, 16)
    with pytest.raises(RuntimeError) as ours:
        torch_flashattn.scaled_dot_product_attention(q, k, k)      # Hq != Hkv without enable_gqa
    with pytest.raises(RuntimeError) as theirs:
        F.scaled_dot_product_attention(q, k, k)
    assert str(ours.value) == str(theirs.value)


def test_sdpa_broadcasts_as_pytorch():
    """Batch (and head) dims SDPA broadcasts between q, k and v go to SDPA, which computes them."""
    cases = [((2, 5, 8), (1, 6, 8), (1, 6, 8)), ((1, 5, 8), (2, 6, 8), (2, 6, 8)),
             ((2, 2, 5, 8), (2, 2, 6, 8), (1, 2, 6, 8)), ((2, 2, 5, 8), (2, 2, 6, 8), (2, 1, 6, 8))]
    for shapes in cases:
        q, k, v = (randn(*s) for s in shapes)
        torch.testing.assert_close(torch_flashattn.scaled_dot_product_attention(q, k, v),
                                   F.scaled_dot_product_attention(q, k, v))
    assert torch_flashattn.stats()["fallback_reasons"] == {"shapes differ": 4}


def test_sdpa_nested_tensors_and_subclasses_go_to_pytorch():
    """Nested tensors (strided and jagged) and tensor subclasses reach SDPA, which computes them (a
    subclass's __torch_function__ sees SDPA, as without the drop-in), counted as falling back."""
    parts = [randn(2, 5, 8), randn(2, 7, 8)]
    strided = torch.nested.nested_tensor(parts)
    jagged = torch.nested.nested_tensor([t.transpose(0, 1) for t in parts], layout=torch.jagged).transpose(1, 2)
    for x in (strided, jagged):
        ours = torch_flashattn.scaled_dot_product_attention(x, x, x)
        theirs = F.scaled_dot_product_attention(x, x, x)
        for a, b in zip(ours.unbind(), theirs.unbind()):
            torch.testing.assert_close(a, b)

    class Constant(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func is F.scaled_dot_product_attention:
                return torch.full(args[0].shape, 7.0)
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))

    q = randn(1, 2, 9, 16).as_subclass(Constant)
    assert (torch_flashattn.scaled_dot_product_attention(q, q, q) == 7).all()
    assert torch_flashattn.stats()["fallback_reasons"] == {"nested tensors": 2, "a tensor subclass": 1}


def test_sdpa_modes_and_tracers_keep_our_kernel():
    """A TorchFunctionMode (a device context) and torch's tracers (make_fx with fake tensors, non-strict
    torch.export) keep the call on our op: only a tensor's own type sends it to SDPA."""
    from torch.fx.experimental.proxy_tensor import make_fx
    q = randn(1, 2, 16, 32)
    with torch.device("cpu"):
        torch_flashattn.scaled_dot_product_attention(q, q, q)
    assert torch_flashattn.stats()["fa"] == 1 and torch_flashattn.stats()["fallback_reasons"] == {}

    def f(q, k, v):
        return torch_flashattn.scaled_dot_product_attention(q, k, v, is_causal=True) * 2

    class M(torch.nn.Module):
        def forward(self, q, k, v):
            return f(q, k, v)

    graphs = [make_fx(f, tracing_mode="fake")(q, q, q).graph,
              torch.export.export(M(), (q, q, q), strict=False).graph]
    for g in graphs:
        assert "fa.forward.default" in [str(n.target) for n in g.nodes if n.op == "call_function"], g


def test_sdpa_arguments_sdpa_refuses_raise_as_in_pytorch():
    """Arguments of types SDPA's binding refuses, and dropout outside [0, 1), go to SDPA, which raises;
    scale and enable_gqa are keyword-only there too. A call refused is not counted as served."""
    q, k, v = (randn(1, 2, 9, 16) for _ in range(3))
    for pos, kw in [((), dict(scale=torch.tensor([0.3]))), ((), dict(is_causal=1)), ((), dict(is_causal=None)),
                    ((), dict(enable_gqa=None)), ((), dict(dropout_p=-0.1)), ((), dict(dropout_p=float("nan"))),
                    ((None, 0.0, False, 0.3, False), {})]:
        with pytest.raises(Exception) as theirs:
            F.scaled_dot_product_attention(q, k, v, *pos, **kw)
        with pytest.raises(type(theirs.value)):
            torch_flashattn.scaled_dot_product_attention(q, k, v, *pos, **kw)
    qh = randn(1, 3, 20, 8)
    with pytest.raises(RuntimeError) as theirs:
        F.scaled_dot_product_attention(qh, k, v, enable_gqa=True)      # Hq not a multiple of Hkv
    with pytest.raises(RuntimeError) as ours:
        torch_flashattn.scaled_dot_product_attention(qh, k, v, enable_gqa=True)
    assert str(ours.value) == str(theirs.value)
    assert torch_flashattn.stats()["fa"] == 0


def test_sdpa_low_rank_inputs_needing_gradients_raise_as_in_pytorch():
    """0-D and 1-D tensors that require grad reach SDPA, which raises its own error, as they do without
    gradients (the CPU gradient rule reads key rows, which they do not have), counted as falling back."""
    for shape in [(), (8,)]:
        x = torch.randn(shape).requires_grad_()
        with pytest.raises(RuntimeError) as theirs:
            F.scaled_dot_product_attention(x, x, x)
        torch_flashattn.reset_stats()
        with pytest.raises(RuntimeError) as ours:
            torch_flashattn.scaled_dot_product_attention(x, x, x)
        assert str(ours.value) == str(theirs.value)
        assert torch_flashattn.stats()["fallback_reasons"] == {"not 3-D or 4-D": 1}


def test_sdpa_forward_mode_ad_is_pytorchs():
    """Forward-mode AD (torch.autograd.forward_ad, torch.func.jvp) and torch.func transforms go to SDPA:
    its tangent under the math backend, its error under the default CPU one (never a zero tangent)."""
    import torch.autograd.forward_ad as fwAD
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v, t = (randn(1, 2, 9, 16) for _ in range(4))
    with sdpa_kernel(SDPBackend.MATH):
        want = torch.func.jvp(lambda q: F.scaled_dot_product_attention(q, k, v), (q,), (t,))[1]
        got = torch.func.jvp(lambda q: torch_flashattn.scaled_dot_product_attention(q, k, v), (q,), (t,))[1]
        torch.testing.assert_close(got, want)
    with pytest.raises(NotImplementedError):       # torch's CPU flash kernel has no forward formula
        torch.func.jvp(lambda q: F.scaled_dot_product_attention(q, k, v), (q,), (t,))
    for fn in (F.scaled_dot_product_attention, torch_flashattn.scaled_dot_product_attention):
        with fwAD.dual_level(), pytest.raises(NotImplementedError):
            fn(fwAD.make_dual(q, t), k, v)
    qb = randn(1, 2, 80, 64)                       # the drop-in's gradient path (4096+ key elements)
    kb, vb = randn(1, 2, 80, 64), randn(1, 2, 80, 64)
    torch.testing.assert_close(
        torch.func.grad(lambda q: torch_flashattn.scaled_dot_product_attention(q, kb, vb).sum())(qb),
        torch.func.grad(lambda q: F.scaled_dot_product_attention(q, kb, vb).sum())(qb))
    reasons = torch_flashattn.stats()["fallback_reasons"]
    assert reasons == {"sdpa_kernel without FLASH_ATTENTION": 1, "forward-mode AD or a torch.func transform": 2}


def test_sdpa_kernel_choice_is_honoured():
    """Inside sdpa_kernel without the flash backend the caller chose SDPA's others: SDPA runs (the math
    backend's double backward works; no backend at all raises as SDPA does)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (randn(1, 2, 9, 16).requires_grad_() for _ in range(3))
    with sdpa_kernel(SDPBackend.MATH):
        out = torch_flashattn.scaled_dot_product_attention(q, k, v)
        (g,) = torch.autograd.grad(out.sum(), q, create_graph=True)
        (g2,) = torch.autograd.grad((g ** 2).sum(), k)
        out_r = F.scaled_dot_product_attention(q, k, v)
        (g_r,) = torch.autograd.grad(out_r.sum(), q, create_graph=True)
        torch.testing.assert_close(g2, torch.autograd.grad((g_r ** 2).sum(), k)[0])
    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]), pytest.raises(RuntimeError, match="No viable backend"):
        torch_flashattn.scaled_dot_product_attention(q, k, v)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]), torch.no_grad():
        torch_flashattn.scaled_dot_product_attention(q, k, v)
    s = torch_flashattn.stats()
    assert s["fa"] == 1 and s["fallback_reasons"] == {"sdpa_kernel without FLASH_ATTENTION": 2}, s


def test_sdpa_under_autocast_casts_as_pytorch(no_amx):
    """Under autocast the drop-in takes the inputs as autocast hands them to SDPA: its output dtype."""
    q, k, v = (randn(1, 2, 33, 16) for _ in range(3))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        got = torch_flashattn.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert got.dtype == want.dtype == torch.bfloat16
    assert_accurate(got, *(t.bfloat16() for t in (q, k, v)), True, None, what="autocast bf16")
    assert torch_flashattn.stats()["fa"] == 1


def test_sdpa_decode_step_on_views_of_one_buffer_compiled_with_dynamic_shapes():
    """A decoding-shaped call on k and v that are views of one buffer, compiled with dynamic shapes: SDPA's
    answer (the split-KV op's written-cache schema read both from the buffer's start under inductor)."""
    def step(q, k, v):
        return torch_flashattn.scaled_dot_product_attention(q, k, v)

    for dynamic in (True, None):
        torch._dynamo.reset()
        fn = torch.compile(step, dynamic=dynamic)
        g = torch.Generator().manual_seed(0)
        for n in (16, 24, 32):                           # None: dynamic from the second length on
            q, kv = torch.randn(1, 2, 1, 8, generator=g), torch.randn(2, 1, 2, n, 8, generator=g)
            want = F.scaled_dot_product_attention(q, kv[0], kv[1])
            torch.testing.assert_close(fn(q, kv[0], kv[1]), want, msg=f"dynamic={dynamic}, {n} keys")


def test_sdpa_compiles_fullgraph():
    q, k, v = (randn(1, 2, 33, 16) for _ in range(3))
    fn = torch.compile(lambda q, k, v: torch_flashattn.scaled_dot_product_attention(q, k, v, is_causal=True),
                       fullgraph=True)
    torch.testing.assert_close(fn(q, k, v), F.scaled_dot_product_attention(q, k, v, is_causal=True))


class TinyAttention(torch.nn.Module):
    """Calls F.scaled_dot_product_attention through the module attribute, as models do."""

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_patch_sdpa_scoped():
    original = F.scaled_dot_product_attention
    m = TinyAttention()
    q, k, v = (randn(1, 2, 40, 16) for _ in range(3))
    expected = m(q, k, v)
    with torch_flashattn.patch_sdpa():
        assert F.scaled_dot_product_attention is torch_flashattn.scaled_dot_product_attention
        got = m(q, k, v)
    assert F.scaled_dot_product_attention is original
    assert torch_flashattn.stats()["fa"] == 1
    torch.testing.assert_close(got, expected)
    with pytest.raises(KeyError):
        with torch_flashattn.patch_sdpa():
            raise KeyError("inside")
    assert F.scaled_dot_product_attention is original
    with torch_flashattn.patch_sdpa():          # blocks nest: the inner one's exit keeps the outer one's
        with torch_flashattn.patch_sdpa():
            pass
        assert F.scaled_dot_product_attention is torch_flashattn.scaled_dot_product_attention
    assert F.scaled_dot_product_attention is original


def test_patch_sdpa_across_threads():
    """Blocks in two threads that overlap (A enters, B enters, A leaves, B leaves): B's block stays
    patched after A leaves, and the original is back after both."""
    import threading
    original = F.scaled_dot_product_attention
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def thread_a():
        with torch_flashattn.patch_sdpa():
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def thread_b():
        a_in.wait(10)
        with torch_flashattn.patch_sdpa():
            b_in.set()
            a_out.wait(10)
            seen["patched"] = F.scaled_dot_product_attention is torch_flashattn.scaled_dot_product_attention

    threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen == {"patched": True}
    assert F.scaled_dot_product_attention is original


# ---- Hugging Face transformers ---------------------------------------------------------------

def tiny_llama_pair():
    transformers = pytest.importorskip("transformers")
    import torch_flashattn.hf

    name = torch_flashattn.hf.register()
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                   initializer_range=0.5)
    torch.manual_seed(0)
    ref = transformers.LlamaForCausalLM(copy.deepcopy(cfg)).eval()   # configs are shared objects: copy
    ref.set_attn_implementation("sdpa")
    ours = transformers.LlamaForCausalLM(copy.deepcopy(cfg)).eval()
    ours.load_state_dict(ref.state_dict())
    ours.set_attn_implementation(name)
    return ref, ours


def test_transformers_trainable_position_bias_goes_to_sdpa():
    """T5 with only its relative attention bias trainable: q, k and v need no gradient, the bias does;
    the op gives its attn_mask none, so the call folds the bias for SDPA, whose gradient matches."""
    transformers = pytest.importorskip("transformers")
    import torch_flashattn.hf

    name = torch_flashattn.hf.register()
    cfg = transformers.T5Config(vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                                num_heads=4, dropout_rate=0.0, pad_token_id=0, eos_token_id=1,
                                decoder_start_token_id=0)
    g = torch.Generator().manual_seed(0)
    ids, dec = torch.randint(4, 128, (2, 24), generator=g), torch.randint(4, 128, (2, 10), generator=g)
    grads = {}
    for impl in ("sdpa", name):
        torch.manual_seed(0)
        model = transformers.T5ForConditionalGeneration(cfg).train()
        model.set_attn_implementation(impl)
        for n, p in model.named_parameters():
            p.requires_grad_("relative_attention_bias" in n)
        model(input_ids=ids, decoder_input_ids=dec).logits.sum().backward()
        grads[impl] = [p.grad for p in model.parameters() if p.requires_grad]
    assert len(grads[name]) == 2
    for a, b in zip(grads[name], grads["sdpa"]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_transformers_prefill_and_padding():
    ref, ours = tiny_llama_pair()
    ids = torch.randint(0, 128, (2, 37), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids).logits, ref(ids).logits, atol=1e-4, rtol=1e-4)
        assert torch_flashattn.stats()["fa"] == 2           # one call per layer
        mask = torch.ones(2, 37, dtype=torch.long)
        mask[1, :5] = 0                                      # left padding: the op's key_mask
        keep = mask.bool()
        torch.testing.assert_close(ours(ids, attention_mask=mask).logits[keep],
                                   ref(ids, attention_mask=mask).logits[keep], atol=1e-4, rtol=1e-4)
    assert torch_flashattn.stats()["fa"] == 4 and torch_flashattn.stats()["fallback_reasons"] == {}


def test_transformers_greedy_generation_with_cache():
    ref, ours = tiny_llama_pair()
    ids = torch.randint(0, 128, (1, 21), generator=torch.Generator().manual_seed(2))
    kw = dict(max_new_tokens=12, do_sample=False, output_logits=True, return_dict_in_generate=True,
              attention_mask=torch.ones_like(ids), pad_token_id=0)
    with torch.no_grad():
        a, b = ref.generate(ids, **kw), ours.generate(ids, **kw)
    assert torch.equal(a.sequences, b.sequences)
    for x, y in zip(a.logits, b.logits):
        torch.testing.assert_close(y, x, atol=1e-4, rtol=1e-4)
    # Prefill and every decoding step (one query against the cache) ran our kernels, the 11 decoding
    # steps of each of the 2 layers the split-KV decode kernel.
    s = torch_flashattn.stats()
    assert s["fa"] == 2 * 12 and s["fa_decode"] == 2 * 11 and s["sdpa"] == 0, s


def test_transformers_padded_generation_counts_its_decoding_steps():
    """A left-padded batch: the padding reaches the backend as key_mask (hf.py's structured mask) in
    prefill and every decoding step; those steps count as fa_decode as the drop-in's own do."""
    ref, ours = tiny_llama_pair()
    ids = torch.randint(1, 128, (2, 9), generator=torch.Generator().manual_seed(4))
    mask = torch.ones_like(ids)
    mask[1, :4] = 0
    kw = dict(max_new_tokens=6, do_sample=False, return_dict_in_generate=True, attention_mask=mask, pad_token_id=0)
    with torch.no_grad():
        a, b = ref.generate(ids, **kw), ours.generate(ids, **kw)
    assert torch.equal(a.sequences, b.sequences)
    s = torch_flashattn.stats()
    assert s["fa"] == 2 * 6 and s["fa_decode"] == 2 * 5 and s["sdpa"] == 0, s


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", ["bhle", "ble"])
def test_sdpa_gradients_on_the_cpu_kernels(causal, layout):
    """fp32 CPU calls that need gradients, from CPU_GRAD_MIN_KEY_ELEMENTS key elements per head, run on
    our forward and backward (counted as fa) with SDPA's gradients; fewer keys go to SDPA in fp32, and
    to ours in bf16."""
    from torch_flashattn.sdpa import CPU_GRAD_MIN_KEY_ELEMENTS
    g = torch.Generator().manual_seed(3)
    shape = (2, 4, 70, 64) if layout == "bhle" else (3, 70, 64)
    assert shape[-2] * shape[-1] >= CPU_GRAD_MIN_KEY_ELEMENTS
    q, k, v = (torch.randn(shape, generator=g) for _ in range(3))
    d_out = torch.randn(shape, generator=g)
    torch_flashattn.reset_stats()
    ours = [t.clone().requires_grad_() for t in (q, k, v)]
    (torch_flashattn.scaled_dot_product_attention(*ours, is_causal=causal) * d_out).sum().backward()
    assert torch_flashattn.stats()["fa"] == 1 and torch_flashattn.stats()["sdpa"] == 0
    ref = [t.double().requires_grad_() for t in (q, k, v)]
    (F.scaled_dot_product_attention(*ref, is_causal=causal) * d_out.double()).sum().backward()
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a.grad.double(), b.grad, atol=2e-5, rtol=0)
    few = [t[..., :20, :].clone().requires_grad_() for t in (q, k, v)]   # 20 keys of 64: SDPA's
    torch_flashattn.scaled_dot_product_attention(*few, is_causal=causal).sum().backward()
    assert torch_flashattn.stats()["sdpa"] == 1
    few16 = [t[..., :20, :].to(torch.bfloat16).requires_grad_() for t in (q, k, v)]   # bf16: ours
    torch_flashattn.scaled_dot_product_attention(*few16, is_causal=causal).sum().backward()
    assert torch_flashattn.stats()["fa"] == 2 and all(t.grad.isfinite().all() for t in few16)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_gradients_on_the_hopper_backward(dtype, causal):
    """On compute capability 9.0, fp16/bf16 calls that need gradients at head dim 64 or 128 with at least
    CUDA_GRAD_MIN_KEYS keys (GQA, 3-D too) run on our forward and the Hopper backward, counted as fa; their
    gradients are within FlashAttention's rule of a float64 reference (2 x SDPA's own error in the dtype,
    plus the slack and one unit of the dtype at the gradient's scale). Fewer keys, other head dims and
    attn_mask calls keep SDPA's backward; so does every call on other GPUs."""
    from test_backward import GRAD_SLACK
    from torch_flashattn.sdpa import CUDA_GRAD_MIN_KEYS as MIN_KEYS
    hopper = torch.cuda.get_device_capability() == (9, 0)
    g = torch.Generator().manual_seed(11)
    cases = [((1, 8, 300, 64), (1, 2, MIN_KEYS + 33, 64), True), ((1, 2, MIN_KEYS + 1, 128), (1, 2, MIN_KEYS + 1, 128), False),
             ((2, MIN_KEYS, 64), (2, MIN_KEYS, 64), False)]
    for qs, ks, gqa in cases:
        q, k, v = (torch.randn(s, generator=g) for s in (qs, ks, ks))
        d_out = torch.randn(qs, generator=g)
        grads = {}
        for name, dt in (("ours", dtype), ("sdpa", dtype), ("ref", torch.float64)):
            leaves = [t.to("cuda", dt).requires_grad_() for t in (q, k, v)]
            fn = torch_flashattn.scaled_dot_product_attention if name == "ours" else F.scaled_dot_product_attention
            torch_flashattn.reset_stats()
            out = fn(*leaves, is_causal=causal, enable_gqa=gqa)
            if name == "ours":
                s = torch_flashattn.stats()
                assert (s["fa"], s["sdpa"], s["exact"]) == ((1, 0, 0) if hopper else (0, 1, 0)), (qs, s)
            grads[name] = torch.autograd.grad((out.double() * d_out.to("cuda", torch.float64)).sum(), leaves)
        for w, a, p, r in zip(("dq", "dk", "dv"), grads["ours"], grads["sdpa"], grads["ref"]):
            err, err_pt = ((x.double() - r).abs().max().item() for x in (a, p))
            bound = 2 * err_pt + GRAD_SLACK[dtype] + torch.finfo(dtype).eps * r.abs().max().item()
            assert err <= bound, f"{qs} {w}: {err:.3e} > {bound:.3e} (SDPA's {err_pt:.3e})"
    # What stays on SDPA's backward: fewer keys, head dims 96 and 256, an attn_mask.
    few = torch.randn(1, 2, MIN_KEYS - 1, 128, device="cuda", dtype=dtype, requires_grad=True)
    d96, d256 = (torch.randn(1, 2, MIN_KEYS, e, device="cuda", dtype=dtype, requires_grad=True) for e in (96, 256))
    q64 = torch.randn(1, 2, MIN_KEYS, 64, device="cuda", dtype=dtype, requires_grad=True)
    mask = torch.rand(MIN_KEYS, MIN_KEYS, device="cuda") > 0.3
    torch_flashattn.reset_stats()
    for t in (few, d96, d256):
        torch_flashattn.scaled_dot_product_attention(t, t, t, is_causal=causal).sum().backward()
    torch_flashattn.scaled_dot_product_attention(q64, q64, q64, attn_mask=mask).sum().backward()
    s = torch_flashattn.stats()
    assert s["sdpa"] == 4 and s["fallback_reasons"] == {"requires_grad (SDPA's backward is faster)": 4}, s
