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
        raises(r"softcap must be a number in \(0, 2.3e\+38\]", q, k, v, softcap=3e38)

    def test_tiny_softcap(self, device):
        """A softcap that rounds to a float 0 was no softcap at all on the kernels; one whose scale / softcap
        passes a float gave NaN rows on CUDA."""
        q, k, v = qkv(device)
        raises(r"softcap must be a number in \(0, 2.3e\+38\] that a float holds", q, k, v, softcap=1e-50)
        raises(r"\|scale\| / softcap must be at most 2.3e\+38, got scale 0.125 and softcap 1e-40", q, k, v,
               softcap=1e-40, scale=0.125)
        raises(r"\|scale\| / softcap must be at most 2.3e\+38, got scale 0.125 and softcap 1e-40", q, k, v,
               softcap=1e-40)                           # the default scale, 1 / sqrt(64)
        torch_flashattn.attention(q, k, v, softcap=1e-30)   # scale / softcap 1.25e29: runs


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
    q, k, v = qkv()
    for name, args in (("q", (None, k, v)), ("k", (q, [1.0], v)), ("v", (q, k, 3))):
        with pytest.raises(TypeError, match=f"attention: {name} must be a torch.Tensor"):
            torch_flashattn.attention(*args)


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
