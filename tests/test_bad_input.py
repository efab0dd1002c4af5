"""Every malformed call raises an error that names the argument and what was expected."""
import math
import os
import subprocess
import sys

import pytest
import torch

import torch_flashattn
from torch_flashattn import _testing
from conftest import DEVICES, HAS_CUDA


def qkv(device="cpu", dtype=torch.float32, B=2, Hq=4, Hkv=2, Nq=8, Nk=8, d=64):
    return (torch.randn(B, Hq, Nq, d, device=device, dtype=dtype),
            torch.randn(B, Hkv, Nk, d, device=device, dtype=dtype),
            torch.randn(B, Hkv, Nk, d, device=device, dtype=dtype))


def raises(match, q, k, v, **kw):
    with pytest.raises((RuntimeError, ValueError), match=match):
        torch_flashattn.attention(q, k, v, **kw)
    with pytest.raises((RuntimeError, ValueError), match=match):
        torch_flashattn.attention_lse(q, k, v, **kw)


@pytest.mark.parametrize("device", DEVICES)
class TestBadInput:
    def test_rank(self, device):
        q, k, v = qkv(device)
        raises(r"q must be a 4-D tensor \(B, H, N, d\), got 3-D", q[0], k, v)
        raises(r"k must be a 4-D tensor .* got 5-D", q, k[None], v)
        raises(r"v must be a 4-D tensor .* got 2-D", q, k, v[0, 0])

    def test_batch_mismatch(self, device):
        q, k, v = qkv(device)
        raises(r"batch size B must match", q, k[:1], v[:1])

    def test_head_dim_mismatch(self, device):
        q, k, v = qkv(device)
        raises(r"head dim d \(last dimension\) must match", q, k[..., :32], v[..., :32])
        raises(r"head dim d \(last dimension\) must match", q, k, v[..., :32])

    def test_seq_len_mismatch(self, device):
        q, k, v = qkv(device)
        raises(r"k and v must have the same number of keys N", q, k, v[:, :, :5])

    def test_kv_heads_mismatch(self, device):
        q, k, v = qkv(device)
        raises(r"k and v must have the same number of heads Hkv", q, k, v[:, :1])

    def test_gqa_not_divisible(self, device):
        q, k, v = qkv(device, Hq=6, Hkv=4)
        raises(r"query heads Hq = 6 must be a multiple of the number of key/value heads Hkv = 4", q, k, v)
        q, k, v = qkv(device, Hq=4, Hkv=0)
        raises(r"Hq = 4 must be a multiple .* Hkv = 0", q, k, v)

    @pytest.mark.parametrize("d", [0, 257, 512])
    def test_head_dim_range(self, device, d):
        q, k, v = qkv(device, d=d)
        raises(rf"head dim d must be in 1..256, got {d}", q, k, v)

    def test_dtype_mismatch(self, device):
        q, k, v = qkv(device)
        raises(r"q, k and v must have the same dtype, got q Float and k Half", q, k.half(), v)
        raises(r"q, k and v must have the same dtype, got q Float and v BFloat16", q, k, v.bfloat16())

    @pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float64, torch.bool])
    def test_unsupported_dtype(self, device, dtype):
        q, k, v = (t.to(dtype) for t in qkv(device))
        raises(r"must be float32, float16 or bfloat16, got", q, k, v)

    @pytest.mark.parametrize("scale", [math.nan, math.inf, -math.inf, 3e38, -1e300])
    def test_non_finite_scale(self, device, scale):
        """Also past ±2.3e38, where scale · log2 e overflows a float (the output was NaN)."""
        q, k, v = qkv(device)
        raises(r"scale must be a finite number", q, k, v, scale=scale)
        torch_flashattn.attention(q, k, v, scale=2e38)      # the largest ones still run

    def test_huge_softcap(self, device):
        q, k, v = qkv(device)
        raises(r"softcap must be a number in \[1.17549e-38, 2.3e\+38\]", q, k, v, softcap=3e38)

    def test_tiny_softcap(self, device):
        """A softcap that rounds to a float 0 was no softcap at all on the kernels; a subnormal one gave
        NaN on the CPU (0 times 1 / softcap); one whose scale / softcap passes a float gave NaN rows on
        CUDA."""
        q, k, v = qkv(device)
        raises(r"softcap must be a number in \[1.17549e-38, 2.3e\+38\] \(a normal float\)", q, k, v, softcap=1e-50)
        # Subnormal: 1 / softcap would leave a float (the C backend's tanh argument was 0 · inf = NaN).
        raises(r"softcap must be a number in \[1.17549e-38, 2.3e\+38\]", q, k, v, softcap=1e-39, scale=0.0)
        raises(r"\|scale\| / softcap must be 0 or in \[1.17549e-38, 2.3e\+38\], got scale 100 and softcap 1e-37", q, k,
               v, softcap=1e-37, scale=100.0)
        # Subnormal: the kernels' tanh argument kept a few bits of the scale (a uniform softmax at 1e-47).
        raises(r"\|scale\| / softcap must be 0 or in \[1.17549e-38, 2.3e\+38\], got scale 1e-10 and softcap 1e\+37", q,
               k, v, softcap=1e37, scale=1e-10)
        torch_flashattn.attention(q, k, v, softcap=1e-30)   # scale / softcap 1.25e29: runs
        torch_flashattn.attention(q, k, v, softcap=1.2e-38, scale=0.0)   # the smallest normal softcaps run


def test_alibi_slopes_and_sinks_past_a_float_on_the_cpu():
    """Times log2 e, a slope or sink past ±2.3e38 leaves a float: the C backend's rows came out NaN.
    The CPU refuses them, naming them, before anything runs (on CUDA they stay on the device, unread)."""
    q, k, v = qkv()
    for bad in (3e38, -3e38, math.inf, -math.inf):
        raises(r"alibi_slopes must be of magnitude at most 2.3e\+38, got .* at flat index 5", q, k, v,
               alibi_slopes=torch.tensor([[0.5] * 4, [0.5, bad, 0.5, 0.5]]))
    for bad in (3e38, -3e38, math.inf):
        raises(r"sinks must be -inf or of magnitude at most 2.3e\+38, got .* at head 2", q, k, v,
               sinks=torch.tensor([0.0, 1.0, bad, 0.0]))
    cache_k, cache_v = k.clone(), v.clone()
    with pytest.raises(RuntimeError, match="fa.forward_kvcache: sinks must be -inf or of magnitude"):
        torch_flashattn.attention_kvcache(q[:, :, :1], cache_k, cache_v, k_new=k[:, :, :1], v_new=v[:, :, :1],
                                          cache_seqlens=torch.tensor([3, 3], dtype=torch.int32),
                                          sinks=torch.full((4,), 3e38))
    assert torch.equal(cache_k, k) and torch.equal(cache_v, v)
    # The largest ones run: only the diagonal key survives a slope of 2.3e38; a sink of 2.3e38 takes it all.
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=True, alibi_slopes=torch.full((4,), 2.3e38),
                                             sinks=torch.tensor([-math.inf, -math.inf, 0.0, 2.3e38]))
    torch.testing.assert_close(out[:, :2], v[:, :1].expand(-1, 2, -1, -1))
    assert torch.equal(out[:, 3], torch.zeros_like(out[:, 3])) and torch.allclose(lse[:, 3], torch.tensor(2.3e38))


@pytest.mark.parametrize("variants", [{}, {"softcap": 1e30}, {"sinks": torch.zeros(1)}])
def test_huge_scale_small_scores_on_the_cpu(variants):
    """Any scale up to ±2.3e38 is allowed, and only scores past it overflow: the C backend multiplied
    q by scale · log2 e first, which left a float for |q| > 1.02 at 2.3e38 (NaN rows and gradients
    where every score was about 4e9). Against float64 autograd: output, lse and gradients."""
    torch.manual_seed(0)
    q = torch.full((1, 1, 3, 4), 10.0, dtype=torch.float64)
    k = torch.randn(1, 1, 5, 4, dtype=torch.float64) * 1e-30
    v = torch.randn(1, 1, 5, 4, dtype=torch.float64)
    scale = 1e38
    ins = [t.float().requires_grad_() for t in (q, k, v)]
    out, lse = torch_flashattn.attention_lse(*ins, scale=scale, **variants)
    # Cotangents of 1e-3: dk = scale · Σ dS q stays a float (about 1e35; at 1 it passes 3.4e38).
    dq, dk, dv = torch.autograd.grad((out.sum() + lse.sum()) * 1e-3, ins)
    ref = [t.clone().requires_grad_() for t in (q, k, v)]
    s = ref[0] @ ref[1].transpose(-1, -2) * scale
    if "softcap" in variants:
        s = variants["softcap"] * torch.tanh(s / variants["softcap"])
    if "sinks" in variants:
        s = torch.cat([s, torch.zeros(*s.shape[:-1], 1, dtype=s.dtype)], -1)
    ref_lse = torch.logsumexp(s, -1)
    p = torch.exp(s - ref_lse[..., None])[..., :5]
    ref_out = p @ ref[2]
    rq, rk, rv = torch.autograd.grad((ref_out.sum() + ref_lse.sum()) * 1e-3, ref)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all(), "non-finite output or lse"
    torch.testing.assert_close(out.double(), ref_out, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse.double(), ref_lse, rtol=1e-6, atol=0)
    for got, want, name in ((dq, rq, "dq"), (dk, rk, "dk"), (dv, rv, "dv")):
        assert torch.isfinite(got).all(), f"non-finite {name}"
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4 * want.abs().max().item(), msg=name)


@pytest.mark.gpu
def test_different_devices():
    q, k, v = qkv("cuda")
    raises(r"q, k and v must be on the same device, got q on cuda:0 and k on cpu", q, k.cpu(), v)
    raises(r"q, k and v must be on the same device, got q on cuda:0 and v on cpu", q, k, v.cpu())


def test_different_devices_meta():
    """Mixed devices fail in tracing too (the fake kernel checks devices)."""
    q, k, v = qkv()
    with pytest.raises((RuntimeError, ValueError), match="same device"):
        torch_flashattn.attention(q, k.to("meta"), v)


def test_fake_kernel_errors_name_their_op():
    """A meta tensor among CPU ones runs the op's fake kernel: its error names that op."""
    q, k, v = qkv()
    for op, kw in (("fa.forward_lse", {}), ("fa.forward_variants", dict(softcap=1.0))):
        with pytest.raises(RuntimeError, match=f"{op}: q, k and v must be on the same device, got q on cpu and k "
                                               f"on meta"):
            torch_flashattn.attention_lse(q, k.to("meta"), v, **kw)
    meta = dict(device="meta")
    with pytest.raises(RuntimeError, match=r"fa.forward_kvcache: k_cache must be a 4-D tensor \(B, H, N, d\), "
                                           "got 3-D"):
        torch_flashattn.attention_kvcache(torch.randn(1, 2, 1, 16, **meta), torch.randn(1, 2, 8, **meta),
                                          torch.randn(1, 2, 8, 16, **meta))


def test_not_a_tensor():
    """Every entry point names the argument that is not a tensor (None reached the ops as an undefined
    tensor, reported as a 1-D one of shape (0)); the drop-in leaves it to SDPA, which raises its own
    TypeError (it raised an AttributeError)."""
    q, k, v = qkv()
    for name, args in (("q", (None, k, v)), ("k", (q, [1.0], v)), ("v", (q, k, 3))):
        for kw in ({}, {"softcap": 1.0}, {"window": (1, 1)}):
            with pytest.raises(TypeError, match=f"attention: {name} must be a torch.Tensor"):
                torch_flashattn.attention(*args, **kw)
        with pytest.raises(TypeError, match=f"attention_lse: {name} must be a torch.Tensor"):
            torch_flashattn.attention_lse(*args)
    with pytest.raises(TypeError, match="attention_kvcache: q must be a torch.Tensor, got NoneType"):
        torch_flashattn.attention_kvcache(None, k, v)
    with pytest.raises(TypeError, match="attention_kvcache: v_cache must be a torch.Tensor"):
        torch_flashattn.attention_kvcache(q, k, None)
    for key, value, arg in ((None, v, "key"), (k, [1.0], "value")):
        with pytest.raises(TypeError, match=f"argument '{arg}' .* must be Tensor"):
            torch_flashattn.scaled_dot_product_attention(q, key, value)


def test_varlen_arguments_not_tensors_or_ints():
    q, k = torch.randn(5, 2, 8), torch.randn(7, 2, 8)
    cq, ck = torch.tensor([0, 5], dtype=torch.int32), torch.tensor([0, 7], dtype=torch.int32)
    with pytest.raises(TypeError, match="attention_varlen: cu_seqlens_k must be a torch.Tensor, got list"):
        torch_flashattn.attention_varlen(q, k, k, cq, [0, 7], 5, 7)
    for bad, err, match in ((7.0, TypeError, "must be an int, got float"), (None, TypeError, "must be an int, got NoneType"),
                            (2 ** 63, ValueError, "must be an int64, got 9223372036854775808")):
        with pytest.raises(err, match=f"attention_varlen: max_seqlen_q {match}"):
            torch_flashattn.attention_varlen(q, k, k, cq, ck, bad, 7)
        with pytest.raises(err, match=f"attention_varlen: max_seqlen_k {match}"):
            torch_flashattn.attention_varlen(q, k, k, cq, ck, 5, bad)


def test_sizes_past_2_40_name_their_tensor():
    """Reachable only through stride-0 views: the error named no tensor (FA_ERR_BAD_SIZE's text)."""
    q = torch.randn(1, 1, 2, 8)
    k = torch.randn(1, 1, 1, 8).expand(1, 1, 2 ** 41, 8)
    for kw in ({}, {"window": (0, 0)}):
        raises(r"k's N = 2199023255552 is past the largest size taken, 2\^40", q, k, k, **kw)
    with pytest.raises(RuntimeError, match=r"fa.forward_kvcache: k_cache's N = 2199023255552 is past"):
        torch_flashattn.attention_kvcache(q, k, k)
    h = torch.randn(1, 1, 1, 8).expand(1, 2 ** 41, 1, 8)
    raises(r"q's H = 2199023255552 is past the largest size taken", h, h, h)


def test_auxiliary_tensor_on_another_device_meta():
    """A meta tensor beside CPU ones sends the call to the fake kernel, which must raise (it once
    returned uninitialised memory): every tensor argument of every op, named in the message."""
    q, k, v = qkv(Nq=5, Nk=7)
    B, Hq, Nq, d = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    meta = lambda t: t.to("meta")
    cases = [("alibi_slopes", dict(alibi_slopes=torch.rand(Hq))), ("sinks", dict(sinks=torch.rand(Hq))),
             ("key_mask", dict(key_mask=torch.ones(B, Nk, dtype=torch.bool))),
             ("attn_mask", dict(attn_mask=torch.zeros(Nq, Nk)))]
    for name, kw in cases:
        with pytest.raises(RuntimeError, match=f"{name} must be on q's device cpu, got meta"):
            torch_flashattn.attention(q, k, v, **{n: meta(t) for n, t in kw.items()})
    qp, kp, vp = (t[0].transpose(0, 1).contiguous() for t in (q, k, v))        # (N, H, d), one sequence
    cu_q, cu_k = torch.tensor([0, Nq], dtype=torch.int32), torch.tensor([0, Nk], dtype=torch.int32)
    for name, (cq, ck) in (("cu_seqlens_q", (meta(cu_q), cu_k)), ("cu_seqlens_k", (cu_q, meta(cu_k)))):
        with pytest.raises(RuntimeError, match=f"{name} must be on q's device cpu, got meta"):
            torch_flashattn.attention_varlen(qp, kp, vp, cq, ck, Nq, Nk)
    kc, vc = torch.zeros(B, Hkv, 16, d), torch.zeros(B, Hkv, 16, d)
    kn, vn = torch.randn(B, Hkv, 2, d), torch.randn(B, Hkv, 2, d)
    lens = torch.full((B,), 3, dtype=torch.int32)
    for name, kw in (("cache_seqlens", dict(cache_seqlens=meta(lens))), ("k_new", dict(k_new=meta(kn), v_new=vn)),
                     ("v_new", dict(k_new=kn, v_new=meta(vn)))):
        full = dict(cache_seqlens=lens, k_new=kn, v_new=vn)
        full.update(kw)
        with pytest.raises(RuntimeError, match=f"{name} must be on q's device cpu, got meta"):
            torch_flashattn.attention_kvcache(q[:, :, :1], kc, vc, **full)
        assert kc.abs().sum() == 0 and vc.abs().sum() == 0, f"{name}: the caches were written"


def test_unknown_kernel_family():
    """A bad FA_KERNEL fails the import with the values it takes; a bad override is refused and
    changes nothing."""
    env = {**os.environ, "FA_KERNEL": "no-such-kernel"}
    r = subprocess.run([sys.executable, "-c", "import torch_flashattn"], env=env, capture_output=True, text=True)
    assert r.returncode != 0
    assert "FA_KERNEL='no-such-kernel': expected one of auto, sm90, sm80, fp32tc, fp32, simt" in r.stderr
    before = _testing.get()
    with pytest.raises(ValueError, match="family must be one of auto, sm90"):
        _testing.set_overrides(family="no-such-kernel")
    with pytest.raises(ValueError, match="outside its range"):
        _testing.set_overrides(decode_warps=5)
    with pytest.raises(TypeError, match="unknown field"):
        _testing.set_overrides(decode_pdl=1)
    with pytest.raises(RuntimeError, match="outside its range"):     # the C check of the last field
        torch.ops.fa._set_overrides([0] * (len(_testing.FIELDS) - 1) + [3])
    for value in (2**32 + 4, 2**40, -2**31 - 1):       # once cut to 32 bits: 4, 0 (automatic), ...
        with pytest.raises(ValueError, match=f"decode_splits must fit a 32-bit int, got {value}"):
            _testing.set_overrides(decode_splits=value)
    with pytest.raises(RuntimeError, match=r"field 3 = 4294967300 is past a C int"):
        torch.ops.fa._set_overrides([0, 0, 0, 2**32 + 4] + [0] * (len(_testing.FIELDS) - 4))
    assert _testing.get() == before


def test_overrides_nest_and_restore():
    """overrides() blocks nest: inner fields add to outer ones, and each exit restores what was set."""
    before = _testing.get()
    with _testing.overrides(decode_splits=3):
        with _testing.overrides(decode_cluster="off"):
            inner = _testing.get()
        outer = _testing.get()
    assert inner["decode_splits"] == 3 and inner["decode_cluster"] == "off"
    assert outer["decode_splits"] == 3 and outer["decode_cluster"] == "auto"
    assert _testing.get() == before


@pytest.mark.parametrize("device", DEVICES)
def test_packed_and_cache_errors_name_the_arguments(device):
    """attention_varlen's errors show the (total, H, d) shapes it was given, not the 4-D views it checks;
    attention_kvcache's name k_cache and v_cache."""
    r = lambda *s: torch.randn(*s, device=device)
    cu_q = torch.tensor([0, 4, 10], dtype=torch.int32, device=device)
    cu_k = torch.tensor([0, 5, 12], dtype=torch.int32, device=device)
    q, k, v = r(10, 2, 8), r(12, 1, 8), r(12, 1, 8)
    cases = [((q, k, r(12, 1, 4)), r"head dim d .* got q \(10, 2, 8\), k \(12, 1, 8\), v \(12, 1, 4\)"),
             ((q, k, r(11, 1, 8)), r"k and v must have the same number of keys N, got q \(10, 2, 8\), k \(12, 1, 8\), "
                                   r"v \(11, 1, 8\)"),
             ((q, r(12, 3, 8), r(12, 3, 8)), r"Hq = 2 must be a multiple of .* Hkv = 3, got q \(10, 2, 8\)"),
             ((q, k.half(), v), r"q, k and v must have the same dtype, got q Float and k Half")]
    for args, match in cases:
        with pytest.raises(RuntimeError, match=match):
            torch_flashattn.attention_varlen(*args, cu_q, cu_k, 6, 7)
    q, kc, vc = r(2, 2, 1, 8), r(2, 1, 16, 8), r(2, 1, 16, 8)
    cases = [((q, kc, r(2, 1, 16, 4)), r"head dim d .* got q \(2, 2, 1, 8\), k_cache \(2, 1, 16, 8\), "
                                       r"v_cache \(2, 1, 16, 4\)"),
             ((q, kc, r(2, 1, 15, 8)), r"k_cache and v_cache must have the same number of keys N"),
             ((q, r(2, 2, 16, 8), vc), r"k_cache and v_cache must have the same number of heads Hkv"),
             ((q, kc.half(), vc), r"q, k_cache and v_cache must have the same dtype, got q Float and k_cache Half"),
             ((q, kc[0], vc), r"k_cache must be a 4-D tensor")]
    for args, match in cases:
        with pytest.raises(RuntimeError, match=match):
            torch_flashattn.attention_kvcache(*args)
