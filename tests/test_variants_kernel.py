"""The variants in the Hopper kernel (csrc/cuda/sm90.cu, VAR): which calls it takes, and its
accuracy where its own structure matters, on sequences long enough for many query tiles and key
blocks (test_variants.py's shapes fit in one or two):

- the key-block range of a tile (the window and causal about δ), blocks with and without masks,
  tiles whose rows see no key (bottom-right causal with Nq > Nk), tails of Nq and Nk;
- each variant and their combinations at d = 64 (the 128 × 128 tile), 128 and 256 (80-key blocks),
  fp16 and bf16, GQA, by FlashAttention's rule against test_variants' float64 reference;
- that these calls run in the kernel (the exact path's counter does not move), and that the calls
  it does not take (fp32, packed sequences) do take the exact path.

GPU only; the kernel needs compute capability 9.0.
"""
import pytest
import torch

import torch_flashattn
from test_variants import (alibi_heads, assert_variant_accurate, bernoulli, describe, make_qkv, rand, seed_of,
                           transposed_mask)

pytestmark = pytest.mark.gpu

NEEDS_SM90 = "the variants run in the Hopper kernel on compute capability 9.0 only"


@pytest.fixture(autouse=True)
def _hopper():
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip(NEEDS_SM90)


def padding_mask(B, Nk, device, left=False):
    """A padded batch's key_mask: sequence b holds Nk − 37·b valid keys (left- or right-padded)."""
    m = torch.zeros(B, Nk, dtype=torch.bool)
    for b in range(B):
        n = max(Nk - 37 * b - 5, 1)
        if left:
            m[b, Nk - n:] = True
        else:
            m[b, :n] = True
    return m.to(device)


def kernel_case(name, g, B, Hq, Nq, Nk, dtype, device):
    band = torch.ones(Nq, Nk, dtype=torch.bool).tril(Nk - Nq).triu(Nk - Nq - 90)   # a bottom-right band
    cases = {
        "window_sym": lambda: dict(window=(100, 50)),
        "window_sym_bottom_right": lambda: dict(window=(100, 50), causal_align="bottom_right"),
        "causal_bottom_right": lambda: dict(causal=True, causal_align="bottom_right"),
        "sliding_causal": lambda: dict(causal=True, window=(256, -1)),
        "sliding_causal_bottom_right": lambda: dict(causal=True, causal_align="bottom_right", window=(200, -1)),
        "window_right_only": lambda: dict(window=(-1, 3)),
        "softcap_causal": lambda: dict(causal=True, softcap=30.0),
        "softcap_small": lambda: dict(softcap=2.0, scale=0.3),
        "alibi_causal": lambda: dict(causal=True, alibi_slopes=alibi_heads(Hq, device)),
        "sinks_window": lambda: dict(sinks=rand(g, Hq, device=device) * 2, window=(64, 64)),
        "key_mask_right_padded": lambda: dict(key_mask=padding_mask(B, Nk, device)),
        "key_mask_left_padded_causal": lambda: dict(key_mask=padding_mask(B, Nk, device, left=True), causal=True,
                                                     causal_align="bottom_right"),
        "t5_bias": lambda: dict(attn_mask=rand(g, 1, Hq, Nq, Nk, dtype=dtype, device=device)),
        "bool_band": lambda: dict(attn_mask=band.to(device)),
        "float_transposed": lambda: dict(attn_mask=transposed_mask(g, Nq, Nk, device)),
        "combo": lambda: dict(causal=True, causal_align="bottom_right", window=(300, -1), softcap=20.0,
                              alibi_slopes=(torch.rand(B, Hq, generator=g) * 0.05).to(device),
                              sinks=rand(g, Hq, device=device), key_mask=bernoulli(g, 0.9, B, Nk, device=device),
                              attn_mask=rand(g, B, 1, 1, Nk, device=device)),
    }
    return cases[name]()


KERNEL_CASES = ["window_sym", "window_sym_bottom_right", "causal_bottom_right", "sliding_causal",
                "sliding_causal_bottom_right", "window_right_only", "softcap_causal", "softcap_small",
                "alibi_causal",
                "sinks_window", "key_mask_right_padded", "key_mask_left_padded_causal", "t5_bias", "bool_band",
                "float_transposed", "combo"]
# (B, Hq, Hkv, Nq, Nk): Nq < Nk, Nq > Nk (bottom-right rows that see nothing), tails of both.
LONG_SHAPES = [(2, 4, 2, 300, 1100), (2, 2, 1, 1100, 700), (1, 4, 4, 513, 513)]


@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", LONG_SHAPES, ids=lambda s: "B{}-H{}-{}-Nq{}-Nk{}".format(*s))
@pytest.mark.parametrize("case", KERNEL_CASES)
def test_long_variants_in_the_kernel(case, shape, dtype, d):
    B, Hq, Hkv, Nq, Nk = shape
    g = torch.Generator().manual_seed(seed_of("kernel", case, shape, d))
    q, k, v = make_qkv(g, B, Hq, Hkv, Nq, Nk, d, dtype, "cuda")
    variants = kernel_case(case, g, B, Hq, Nq, Nk, dtype, "cuda")
    what = f"{case} {dtype} {shape} d={d}: {describe(variants)}"
    before = torch.ops.fa._exact_calls()
    out, lse = torch_flashattn.attention_lse(q, k, v, **variants)
    assert torch.ops.fa._exact_calls() == before, f"{what}: took the exact path, not the kernel"
    assert_variant_accurate(out, lse, q, k, v, what=what, **variants)


def test_which_calls_the_kernel_takes():
    g = torch.Generator().manual_seed(5)
    q, k, v = make_qkv(g, 2, 4, 2, 64, 96, 64, torch.bfloat16, "cuda")
    counts = []
    for call in (lambda: torch_flashattn.attention(q, k, v, window=(8, 8)),
                 lambda: torch_flashattn.attention(q, k, v, softcap=5.0, scale=0.0),
                 lambda: torch_flashattn.attention(q.float(), k.float(), v.float(), window=(8, 8)),
                 lambda: torch_flashattn.attention_varlen(
                     q[0].transpose(0, 1).contiguous(), k[0].transpose(0, 1).contiguous(),
                     v[0].transpose(0, 1).contiguous(), torch.tensor([0, 64], dtype=torch.int32, device="cuda"),
                     torch.tensor([0, 96], dtype=torch.int32, device="cuda"), 64, 96, window=(8, 8))):
        before = torch.ops.fa._exact_calls()
        call()
        counts.append(torch.ops.fa._exact_calls() - before)
    assert counts == [0, 1, 1, 1], "bf16 in the kernel; softcap with scale 0, fp32 and packed sequences exact"


def test_poisoned_output_fully_written():
    """Every output element and lse entry is written by the kernel (inputs that leave rows with
    no key, rows past the last query tile's end), including rows that see nothing."""
    g = torch.Generator().manual_seed(6)
    B, Hq, Nq, Nk, d = 2, 4, 333, 200, 128
    q, k, v = make_qkv(g, B, Hq, 2, Nq, Nk, d, torch.bfloat16, "cuda")
    variants = dict(causal=True, causal_align="bottom_right", window=(50, -1))
    torch.cuda.empty_cache()
    for _ in range(3):   # leave NaN in the allocator's blocks the outputs may reuse
        torch.full((B, Hq, Nq, d), float("nan"), dtype=torch.bfloat16, device="cuda")
    out, lse = torch_flashattn.attention_lse(q, k, v, **variants)
    assert not out.isnan().any() and not lse.isnan().any()
    assert (out[:, :, : Nq - Nk] == 0).all() and (lse[:, :, : Nq - Nk] == float("-inf")).all()
    assert_variant_accurate(out, lse, q, k, v, what="poisoned", **variants)
