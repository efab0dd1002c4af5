"""The fp32 tensor-core kernel (csrc/cuda/fp32tc.cu, three TF32 products per product) forced with
the fp32tc family override, so that a silent fallback to the FFMA kernel cannot pass for it. It is held to
the same rule as every fp32 path (2 × PyTorch's own fp32 error + 2e-6, against float64)."""
import pytest
import torch

import torch_flashattn
from conftest import HAS_CUDA, assert_accurate, randn, reference_lse

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not HAS_CUDA or torch.cuda.get_device_capability()[0] < 8,
                                 reason="needs an sm_80+ GPU")]

# d: both compiled widths and widths padded up to them; odd widths take the unaligned loads.
HEAD_DIMS = [1, 8, 33, 64, 72, 100, 128]
SEQ_LENS = [(1, 1), (1, 700), (63, 65), (128, 128), (129, 257), (300, 77), (1000, 1000)]


@pytest.fixture
def forced(fa_overrides):
    fa_overrides(family="fp32tc")


@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("nq,nk", SEQ_LENS)
@pytest.mark.parametrize("causal", [False, True])
def test_fp32tc_matches_sdpa(d, nq, nk, causal, forced):
    torch.manual_seed(nq * 7 + nk + d)
    q = randn(2, 4, nq, d, device="cuda")
    k = randn(2, 2, nk, d, device="cuda")
    v = randn(2, 2, nk, d, device="cuda")
    out = torch_flashattn.attention(q, k, v, causal=causal)
    assert_accurate(out, q, k, v, causal, what=f"fp32tc d={d} Nq={nq} Nk={nk} causal={causal}")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("scale", [None, 2.0, -0.7, 0.0])
def test_fp32tc_lse_layouts_and_scales(causal, d, scale, forced):
    """forward_lse, a (B, N, H, d) transposed view, MQA, large logits (scale 2), a negative and a
    zero scale."""
    torch.manual_seed(d)
    B, H, N = 2, 8, 517
    q = randn(B, N, H, d, device="cuda").transpose(1, 2)
    k = randn(B, N, 1, d, device="cuda").transpose(1, 2)
    v = randn(B, N, 1, d, device="cuda").transpose(1, 2)
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal, scale=scale)
    assert_accurate(out, q, k, v, causal, scale=scale, what=f"fp32tc layouts scale={scale}")
    err = (lse.double() - reference_lse(q, k, causal, scale=scale)).abs().max().item()
    assert err < 1e-4, f"lse max error {err:.3e}"


def test_fp32tc_refuses_what_it_does_not_take(forced, fa_overrides):
    """Forced, it refuses d > 128 and fp16; under auto, d > 128 runs on the FFMA kernel."""
    q = randn(1, 2, 50, 129, device="cuda")
    with pytest.raises(RuntimeError, match="not supported|unsupported"):
        torch_flashattn.attention(q, q, q)
    with pytest.raises(RuntimeError, match="not supported|unsupported"):
        torch_flashattn.attention(*(q[..., :64].half(),) * 3)
    fa_overrides(family="auto")
    assert_accurate(torch_flashattn.attention(q, q, q), q, q, q, what="auto d=129")
