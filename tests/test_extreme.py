"""Extreme shapes on CUDA: B·H past the 65535 grid limit of a y/z grid dimension, one query against
128k keys, one 128k-token head, tensors of more than 2³¹ elements, and causal with Nq ≫ Nk and
Nq ≪ Nk (SDPA's top-left alignment). Every CUDA kernel family that takes the dtype runs each shape.

Where the full Nq × Nk reference does not fit, the fp64 reference is computed for a sample of query
rows (random rows plus the first, the last and those around the 2³¹-element offset), chunked over
the keys, and PyTorch's own same-dtype error is measured on the same rows: SDPA run on just those
query rows (one call per row when causal, with the keys that row sees, so the top-left mask is
kept). The accuracy rule is the suite's: our error ≤ 2 × PyTorch's + slack (conftest.SLACK).
Cases skip when the GPU lacks the memory they need.
"""
import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_flashattn
from conftest import KERNELS, SLACK, assert_accurate, use_kernel

CUDA_KERNELS = [pytest.param(f"cuda{f}", marks=pytest.mark.gpu) for f in ("", "-sm80", "-fp32", "-simt")]
DTYPES = [torch.float32, torch.bfloat16]
GiB = 2 ** 30
# Sanity ceilings on our error, so that a broken PyTorch result (large err_pt) cannot hide ours.
CEILING = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 2e-2}


def need_memory(gib):
    free, _ = torch.cuda.mem_get_info()
    if free < gib * GiB:
        pytest.skip(f"needs {gib} GiB of free GPU memory, {free / GiB:.1f} GiB free")


def sample_rows(nq, n_random=256, extra=(), seed=0):
    g = torch.Generator().manual_seed(seed)
    rows = set(torch.randint(0, nq, (min(n_random, nq),), generator=g).tolist())
    rows |= {0, nq - 1} | {r for r in extra if 0 <= r < nq}
    return sorted(rows)


def reference_rows(q, k, v, rows, causal, scale):
    """fp64 attention for query rows `rows` of every (b, h): (B, Hq, len(rows), d). Online softmax
    over key chunks, so 128k or 33M keys fit."""
    B, Hq, _, d = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    rows_t = torch.tensor(rows, device=q.device)
    # fp64 scores (rows × chunk) and K/V chunks (chunk × d) of at most 512 MiB / 1 GiB each.
    chunk = max(1024, min(2 ** 26 // len(rows), 2 ** 27 // d))
    out = torch.empty(B, Hq, len(rows), d, dtype=torch.float64, device=q.device)
    for b in range(B):
        for h in range(Hq):
            qr = q[b, h, rows_t].double()
            kk, vv = k[b, h // (Hq // Hkv)], v[b, h // (Hq // Hkv)]
            m = torch.full((len(rows),), -math.inf, dtype=torch.float64, device=q.device)
            l = torch.zeros_like(m)
            acc = torch.zeros(len(rows), d, dtype=torch.float64, device=q.device)
            for j0 in range(0, Nk, chunk):
                s = (qr @ kk[j0:j0 + chunk].double().T) * scale
                if causal:   # top-left: row i sees keys j <= i (key 0 always, so m is finite)
                    keys = torch.arange(j0, j0 + s.shape[1], device=q.device)
                    s.masked_fill_(keys[None, :] > rows_t[:, None], -math.inf)
                m_new = torch.maximum(m, s.max(-1).values)
                alpha, p = torch.exp(m - m_new), torch.exp(s - m_new[:, None])
                l = l * alpha + p.sum(-1)
                acc = acc * alpha[:, None] + p @ vv[j0:j0 + chunk].double()
                m = m_new
            out[b, h] = acc / l[:, None]
    return out


def pytorch_rows(q, k, v, rows, causal, scale, backend=None):
    """PyTorch's SDPA in q's dtype on the sampled rows only (its default backend, or `backend`)."""
    def sdpa(qq, kk, vv):
        if backend is not None:
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(qq, kk, vv, scale=scale, enable_gqa=True)
        try:
            return F.scaled_dot_product_attention(qq, kk, vv, scale=scale, enable_gqa=True)
        except RuntimeError:   # a shape the default backend declines: the math backend
            with sdpa_kernel(SDPBackend.MATH):
                return F.scaled_dot_product_attention(qq, kk, vv, scale=scale, enable_gqa=True)

    if not causal:
        return sdpa(q[:, :, rows], k, v)
    nk = k.shape[2]
    return torch.cat([sdpa(q[:, :, i:i + 1], k[:, :, :min(i + 1, nk)], v[:, :, :min(i + 1, nk)])
                      for i in rows], dim=2)


def assert_accurate_rows(out, q, k, v, rows, causal=False, scale=None, backend=None, what=""):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    assert out.shape == q.shape and out.dtype == q.dtype and out.device == q.device
    ours = out[:, :, rows]
    assert torch.isfinite(ours).all(), f"{what}: non-finite output"
    ref = reference_rows(q, k, v, rows, causal, scale)
    pt = pytorch_rows(q, k, v, rows, causal, scale, backend)
    err = (ours.double() - ref).abs().max().item()
    err_pt = (pt.double() - ref).abs().max().item()
    bound = 2 * err_pt + SLACK[q.dtype]
    assert err <= bound, (f"{what}: our max error {err:.3e} > 2 × PyTorch's {err_pt:.3e} + slack = {bound:.3e} "
                          f"(over {len(rows)} sampled rows)")
    assert err <= CEILING[q.dtype], f"{what}: our max error {err:.3e} (PyTorch's {err_pt:.3e})"


@pytest.mark.parametrize("kernel", CUDA_KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("B,H", [(70000, 1), (1, 70000), (300, 300)])
def test_many_heads(kernel, dtype, B, H, fa_overrides):
    """B·H > 65535: more (batch, head) pairs than a CUDA y/z grid dimension holds."""
    use_kernel(kernel, dtype, fa_overrides)
    torch.manual_seed(B + H)
    q = torch.randn(B, H, 17, 32, dtype=dtype, device="cuda")
    k = torch.randn(B, H, 9, 32, dtype=dtype, device="cuda")
    v = torch.randn(B, H, 9, 32, dtype=dtype, device="cuda")
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=True)
    # The math backend as PyTorch's side: fused SDPA backends put B or H in a y/z grid dimension.
    with sdpa_kernel(SDPBackend.MATH):
        assert_accurate(out, q, k, v, causal=True, what=f"B={B} H={H}")
    assert torch.isfinite(lse).all()
    # Spot-check that the last (batch, head) pairs were computed, not left unwritten.
    assert torch.equal(out[-1:, -1:], torch_flashattn.attention(q[-1:, -1:], k[-1:, -1:], v[-1:, -1:], causal=True))


@pytest.mark.parametrize("kernel", CUDA_KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_one_query_long_keys(kernel, dtype, causal, fa_overrides):
    """Nq = 1 against Nk = 128k (decoding against a long context), GQA 8 : 2, d = 128. Causal
    (top-left) lets the one query see key 0 only."""
    use_kernel(kernel, dtype, fa_overrides)
    need_memory(2)
    torch.manual_seed(11)
    q = torch.randn(1, 8, 1, 128, dtype=dtype, device="cuda")
    k = torch.randn(1, 2, 131072, 128, dtype=dtype, device="cuda")
    v = torch.randn(1, 2, 131072, 128, dtype=dtype, device="cuda")
    out = torch_flashattn.attention(q, k, v, causal=causal)
    assert_accurate_rows(out, q, k, v, [0], causal, what=f"Nq=1 Nk=128k causal={causal}")
    if causal:
        torch.testing.assert_close(out, v[:, :, :1].repeat_interleave(4, dim=1), atol=0, rtol=0)


@pytest.mark.parametrize("kernel", CUDA_KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("d,causal", [(64, False), (128, True)])
def test_long_sequence_one_head(kernel, dtype, d, causal, fa_overrides):
    """N = 128k, one head: 256 sampled rows against the chunked fp64 reference."""
    use_kernel(kernel, dtype, fa_overrides)
    need_memory(2)
    torch.manual_seed(12)
    n = 131072
    q, k, v = (torch.randn(1, 1, n, d, dtype=dtype, device="cuda") for _ in range(3))
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal)
    rows = sample_rows(n, extra=(1, 127, 128, 129, n // 2, n - 2))
    assert_accurate_rows(out, q, k, v, rows, causal, what=f"N=128k d={d} causal={causal}")
    assert torch.isfinite(lse).all()


@pytest.mark.parametrize("kernel", CUDA_KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_query_over_2g_elements(kernel, dtype, causal, fa_overrides):
    """q and the output hold more than 2³¹ elements (one head, 2²⁵ + 1000 rows of d = 64): row
    offsets past the int32 range. Rows around element 2³¹ are among the sampled ones."""
    use_kernel(kernel, dtype, fa_overrides)
    nq, d = 2 ** 25 + 1000, 64
    need_memory(2.5 * nq * d * dtype.itemsize / GiB + 1)
    torch.manual_seed(13)
    q = torch.randn(1, 1, nq, d, dtype=dtype, device="cuda")
    k, v = (torch.randn(1, 1, 100, d, dtype=dtype, device="cuda") for _ in range(2))
    assert q.numel() > 2 ** 31
    out = torch_flashattn.attention(q, k, v, causal=causal)
    edge = 2 ** 31 // d
    rows = sample_rows(nq, n_random=64, extra=(50, 99, 100, edge - 1, edge, edge + 1, nq - 2))
    # The math backend as PyTorch's side (on the sampled rows only): no fused backend is trusted
    # with int32-overflowing offsets here.
    assert_accurate_rows(out, q, k, v, rows, causal, backend=SDPBackend.MATH, what=f"Nq=2^25+1000 causal={causal}")
    del q, out


@pytest.mark.parametrize("kernel", [pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_keys_over_2g_elements(kernel, dtype, fa_overrides):
    """k and v hold more than 2³¹ elements (one head, 2²⁵ + 1000 keys of d = 64): key offsets past
    the int32 range, and 33M keys for 3 queries. The automatic choice runs the split-KV kernel
    here (few query tiles, many keys); a forced single-pass family would sum all 33M keys in one
    tensor-core accumulation chain, whose truncating adds bias the result (README, Limits), so
    the forced families' 64-bit key offsets are checked by test_key_offsets_over_2g_elements."""
    use_kernel(kernel, dtype, fa_overrides)
    nk, d = 2 ** 25 + 1000, 64
    need_memory(4 * nk * d * dtype.itemsize / GiB + 2)   # k, v and the math backend's scaled copy of k
    torch.manual_seed(14)
    q = torch.randn(1, 1, 3, d, dtype=dtype, device="cuda")
    k, v = (torch.randn(1, 1, nk, d, dtype=dtype, device="cuda") for _ in range(2))
    assert k.numel() > 2 ** 31
    out, lse = torch_flashattn.attention_lse(q, k, v)
    assert_accurate_rows(out, q, k, v, [0, 1, 2], backend=SDPBackend.MATH, what="Nk=2^25+1000")
    s = torch.cat([q[0, 0].double() @ k[0, 0, j:j + 2 ** 22].double().T for j in range(0, nk, 2 ** 22)], -1)
    torch.testing.assert_close(lse[0, 0].double(), torch.logsumexp(s / math.sqrt(d), -1), atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("kernel", CUDA_KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_key_offsets_over_2g_elements(kernel, dtype, causal, fa_overrides):
    """Keys and values read past element 2³¹ of their storage, for every family: 4097 keys and
    queries, every 8192nd row of a (2²⁵ + 1000, 64) tensor, so the last key sits at element 2³¹
    (row stride 2¹⁹ elements)."""
    use_kernel(kernel, dtype, fa_overrides)
    n, d, step = 2 ** 25 + 1000, 64, 8192
    need_memory(2 * n * d * dtype.itemsize / GiB + 1)
    torch.manual_seed(15)
    k_all, v_all = (torch.randn(1, 1, n, d, dtype=dtype, device="cuda") for _ in range(2))
    k, v = k_all[:, :, ::step], v_all[:, :, ::step]
    assert k.shape[2] == 4097 and k.stride(2) * (k.shape[2] - 1) >= 2 ** 31
    q = torch.randn(1, 2, 4097, d, dtype=dtype, device="cuda")
    out = torch_flashattn.attention(q, k, v, causal=causal)
    assert_accurate(out, q, k, v, causal=causal, what=f"keys at element offsets up to 2^31, causal={causal}")


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nq,nk", [(4099, 77), (77, 4099), (5000, 1), (1, 5000), (2047, 129)])
def test_causal_unequal_lengths(kernel, dtype, nq, nk, fa_overrides):
    """Causal with Nq ≫ Nk and Nq ≪ Nk: top-left alignment, query i sees keys j ≤ i (rows i ≥ Nk
    see every key; with Nq ≪ Nk most keys are never seen)."""
    device = use_kernel(kernel, dtype, fa_overrides)
    torch.manual_seed(nq + nk)
    q = torch.randn(1, 4, nq, 64, dtype=dtype, device=device)
    k = torch.randn(1, 2, nk, 64, dtype=dtype, device=device)
    v = torch.randn(1, 2, nk, 64, dtype=dtype, device=device)
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=True)
    assert_accurate(out, q, k, v, causal=True, what=f"causal Nq={nq} Nk={nk}")
    # Row 0 sees key 0 alone: its output is v[0] and its lse the one scaled score.
    torch.testing.assert_close(out[:, :, 0], v[:, :, 0].repeat_interleave(2, dim=1), atol=0, rtol=0)
    s00 = (q[:, :, 0].double() * k[:, :, 0].double().repeat_interleave(2, dim=1)).sum(-1) / 8
    torch.testing.assert_close(lse[:, :, 0].double(), s00, atol=1e-4, rtol=1e-5)
