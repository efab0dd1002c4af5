"""fa.forward / fa.forward_lse against the upcast SDPA reference, over awkward shapes."""
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_flashattn
from conftest import DEVICES, KERNELS, assert_accurate, randn, reference_lse, use_kernel

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
HEAD_DIMS = [1, 40, 64, 80, 128, 256]
# (Nq, Nk): tile edges, Nq != Nk both ways, a single query, a single key.
SEQ_LENS = [(1, 1), (17, 17), (97, 128), (128, 97), (1025, 1025), (1, 1025), (1025, 17)]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("nq,nk", SEQ_LENS)
@pytest.mark.parametrize("causal", [False, True])
def test_forward_matches_sdpa(kernel, dtype, d, nq, nk, causal, fa_overrides):
    device = use_kernel(kernel, dtype, fa_overrides)
    torch.manual_seed(nq * 1000 + nk + d)
    hq, hkv = (4, 2) if d % 2 == 0 else (3, 3)   # GQA on most shapes, plain MHA on the others
    q = randn(2, hq, nq, d, dtype=dtype, device=device)
    k = randn(2, hkv, nk, d, dtype=dtype, device=device)
    v = randn(2, hkv, nk, d, dtype=dtype, device=device)
    out = torch_flashattn.attention(q, k, v, causal=causal)
    assert_accurate(out, q, k, v, causal, what=f"{dtype} d={d} Nq={nq} Nk={nk} causal={causal}")


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("nq,nk,d", [(97, 128, 64), (128, 97, 40), (1, 1025, 128), (300, 300, 256)])
def test_lse(kernel, dtype, causal, nq, nk, d, fa_overrides):
    device = use_kernel(kernel, dtype, fa_overrides)
    torch.manual_seed(0)
    q = randn(1, 4, nq, d, dtype=dtype, device=device)
    k = randn(1, 1, nk, d, dtype=dtype, device=device)
    v = randn(1, 1, nk, d, dtype=dtype, device=device)
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal, scale=0.3)
    assert_accurate(out, q, k, v, causal, scale=0.3, what="forward_lse out")
    assert lse.shape == (1, 4, nq) and lse.dtype == torch.float32
    ref = reference_lse(q, k, causal, scale=0.3)
    err = (lse.double() - ref).abs().max().item()
    assert err < 1e-4, f"lse max error {err:.3e}"
    # forward and forward_lse run the same computation.
    assert torch.equal(out, torch_flashattn.attention(q, k, v, causal=causal, scale=0.3))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("scale", [0.0, 0.05, -0.5, 2.0])
def test_scale(kernel, dtype, scale, fa_overrides):
    device = use_kernel(kernel, dtype, fa_overrides)
    torch.manual_seed(1)
    q, k, v = (randn(1, 2, 65, 64, dtype=dtype, device=device) for _ in range(3))
    out = torch_flashattn.attention(q, k, v, scale=scale)
    assert_accurate(out, q, k, v, scale=scale, what=f"scale={scale}")


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_strided_views(kernel, dtype, fa_overrides):
    device = use_kernel(kernel, dtype, fa_overrides)
    """Views with a contiguous last dim run as they are; others are copied first."""
    torch.manual_seed(2)
    B, N, H, d = 2, 130, 4, 64
    # (B, N, H, d) memory seen as (B, H, N, d): row stride H·d, head stride d.
    x = randn(B, N, 3 * H, d, dtype=dtype, device=device)
    q, k, v = (t.transpose(1, 2) for t in x.split(H, dim=2))
    assert not q.is_contiguous() and q.stride(-1) == 1
    assert_accurate(torch_flashattn.attention(q, k, v, causal=True), q, k, v, True, what="transposed")
    # Every other query row; K/V heads broadcast with stride 0 (expand).
    q2 = randn(B, H, 2 * N, d, dtype=dtype, device=device)[:, :, ::2]
    k2 = randn(B, 1, N, d, dtype=dtype, device=device).expand(B, H, N, d)
    v2 = randn(B, 1, N, d, dtype=dtype, device=device).expand(B, H, N, d)
    assert_accurate(torch_flashattn.attention(q2, k2, v2), q2, k2, v2, what="sliced/expanded")
    # Last dim not contiguous: copied by the op.
    q3 = randn(B, H, N, 2 * d, dtype=dtype, device=device)[..., ::2]
    assert q3.stride(-1) == 2
    assert_accurate(torch_flashattn.attention(q3, k, v), q3, k, v, what="strided last dim")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape_q,shape_kv", [
    ((0, 2, 8, 64), (0, 2, 8, 64)),    # B = 0
    ((2, 0, 8, 64), (2, 0, 8, 64)),    # H = 0
    ((2, 2, 0, 64), (2, 2, 8, 64)),    # Nq = 0
    ((2, 2, 8, 64), (2, 2, 0, 64)),    # Nk = 0: every row attends to nothing, SDPA returns 0
    ((2, 2, 0, 64), (2, 2, 0, 64)),
])
@pytest.mark.parametrize("causal", [False, True])
def test_empty(device, shape_q, shape_kv, causal):
    q = randn(*shape_q, device=device)
    k, v = randn(*shape_kv, device=device), randn(*shape_kv, device=device)
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal)
    with sdpa_kernel(SDPBackend.MATH):   # torch 2.11's CPU flash kernel crashes on H = 0
        expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert out.shape == expected.shape and lse.shape == shape_q[:3]
    assert torch.equal(out, expected)
    if shape_kv[2] == 0:
        assert (lse == float("-inf")).all()


@pytest.mark.parametrize("device", DEVICES)
def test_does_not_touch_inputs(device):
    torch.manual_seed(3)
    q, k, v = (randn(1, 2, 70, 64, device=device) for _ in range(3))
    copies = [t.clone() for t in (q, k, v)]
    torch_flashattn.attention(q, k, v, causal=True)
    for t, c in zip((q, k, v), copies):
        assert torch.equal(t, c)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_nonfinite_inputs_match_sdpa(kernel, dtype, causal, fa_overrides):
    """NaN and ±inf in q or k give NaN in exactly the rows where SDPA's fused backends give them: a
    NaN key poisons the rows that see it, and not the rows a causal mask hides it from (SDPA's
    math backend adds the mask to the scores, so there NaN also reaches the hidden rows). Other rows
    are exact. (±inf in v: see test_inf_value.)"""
    device = use_kernel(kernel, dtype, fa_overrides)
    torch.manual_seed(7)
    q, k, v = (randn(1, 2, 70, 32, dtype=dtype, device=device) for _ in range(3))
    q[0, 0, 5, 3] = float("nan")
    k[0, 1, 40, 0] = float("nan")
    q[0, 1, 7, 1] = float("inf")
    out = torch_flashattn.attention(q, k, v, causal=causal)
    # The default (fused) SDPA backend on fp32 copies: flash on CPU, efficient on CUDA.
    fused = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    assert torch.equal(out.isnan(), fused.isnan()), "NaN pattern differs from SDPA's"
    # Head 1: the NaN key 40 reaches every row that sees it; row 7 (an inf query) is NaN regardless.
    nan_rows = out.isnan()[0, 1].any(-1).nonzero().flatten().tolist()
    assert nan_rows == ([7] + list(range(40, 70)) if causal else list(range(70))), nan_rows
    finite = fused.isfinite()
    err = (out.float() - fused)[finite].abs().max().item()
    assert err < (1e-5 if dtype == torch.float32 else 2e-2), f"finite rows: max difference {err:.2e}"


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_inf_value(kernel, dtype, fa_overrides):
    """−inf in v (key 50, column 2): every row's weight of key 50 is > 0, so column 2 of every row is
    −inf and the other columns are exact. Causal is left out on purpose: there, rows that cannot see
    key 50 but share a tile with it may get 0 · (−inf) = NaN in column 2, as SDPA's fused CUDA
    backends do, at tile granularity that differs between implementations."""
    device = use_kernel(kernel, dtype, fa_overrides)
    torch.manual_seed(8)
    q, k, v = (randn(1, 2, 70, 32, dtype=dtype, device=device) for _ in range(3))
    v[0, 0, 50, 2] = float("-inf")
    out = torch_flashattn.attention(q, k, v)
    assert (out[0, 0, :, 2] == float("-inf")).all()
    v_fin = v.clone()
    v_fin[0, 0, 50, 2] = 0
    rest = torch.ones_like(out, dtype=torch.bool)
    rest[0, 0, :, 2] = False
    expected = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v_fin.double())
    err = (out.double() - expected)[rest].abs().max().item()
    assert err < (1e-5 if dtype == torch.float32 else 2e-2), f"finite columns: max difference {err:.2e}"
