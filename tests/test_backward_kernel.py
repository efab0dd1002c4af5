"""The CUDA backward kernels (csrc/cuda/sm90_backward.cu on Hopper, csrc/cuda/sm80_backward.cu): fp16
and bf16 gradients on tensor cores, under the automatic choice and with each family forced. Forced,
sm90 runs only the Hopper kernel: the variants it does not compute (softcap, ALiBi, key_mask, packed
sequences) are then computed exactly and counted, which the tests assert.

Gradients against autograd through test_variants' float64 reference by FlashAttention's rule
(test_backward.check_grads), over awkward shapes (tails of every tile, one query, more keys than
queries and fewer), GQA, d from 16 to 128, both causal alignments, windows, softcap, ALiBi,
key_mask, sinks and their combinations, packed sequences (attention_varlen), a loss that uses lse,
strided views, a ring step's given D (delta) and a training step captured in a CUDA graph. Each
check also asserts that the kernel ran: the exact path's counter does not move. The calls the kernel
does not take (d > 128, attn_mask, fp32, another family) are computed exactly and counted, and so
are all calls under torch.use_deterministic_algorithms(True), whose gradients must be bit-identical
run to run.
"""
import warnings

import pytest
import torch

import torch_flashattn
from test_backward import check_grads, check_varlen_grads
from test_variants import make_qkv, seed_of, variant_kwargs

pytestmark = pytest.mark.gpu

FAMILIES = ["auto", "sm80", "sm90"]
HOPPER_LEAVES = ("softcap", "alibi", "key_mask")      # the variants sm90_backward.cu does not compute
DTYPES = [torch.float16, torch.bfloat16]
SHAPES = [(2, 4, 2, 37, 53, 32), (1, 2, 1, 64, 24, 64), (2, 2, 2, 1, 40, 40), (1, 3, 1, 200, 333, 128),
          (2, 2, 1, 130, 129, 96), (1, 1, 1, 257, 64, 16), (1, 2, 2, 300, 700, 80)]
CASES = ["plain", "causal_top_left", "causal_bottom_right", "window", "window_left_causal_bottom_right",
         "window_right_only", "sinks", "sinks_causal_window", "softcap", "softcap_causal", "alibi_heads_causal",
         "alibi_batch_bottom_right", "key_mask_bool", "key_mask_int", "combo_window_softcap_sinks_key_mask",
         "combo_alibi_window_sinks_bottom_right"]


def on_hopper():
    return torch.cuda.get_device_capability() == (9, 0)


def kernel_grads(q, k, v, variants, use_lse, what, kernel=True):
    """check_grads, and the kernel computed them (no exact-path call); kernel=False: the exact path did."""
    before = torch_flashattn.stats()["exact"]
    check_grads(q, k, v, variants, use_lse, what)
    if kernel:
        assert torch_flashattn.stats()["exact"] == before, f"{what}: the backward left the kernel"
    else:
        assert torch_flashattn.stats()["exact"] > before, f"{what}: no exact-path call"


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B{}-H{}-{}-Nq{}-Nk{}-d{}".format(*s))
@pytest.mark.parametrize("case", CASES)
def test_kernel_gradients(family, dtype, shape, case, fa_overrides):
    if family == "sm90" and not on_hopper():
        pytest.skip("the Hopper kernels need compute capability 9.0")
    fa_overrides(family=family)
    B, Hq, Hkv, Nq, Nk, d = shape
    g = torch.Generator().manual_seed(seed_of(case, shape))
    q, k, v = make_qkv(g, B, Hq, Hkv, Nq, Nk, d, dtype, "cuda")
    variants = {} if case == "plain" else variant_kwargs(case, g, B, Hq, Nq, Nk, dtype, "cuda")
    kernel = family != "sm90" or not any(w in case for w in HOPPER_LEAVES)
    kernel_grads(q, k, v, variants, use_lse=False, what=f"{family} {case} {dtype} {shape}", kernel=kernel)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", ["plain", "causal_top_left", "sinks_causal_window"])
def test_kernel_gradients_through_lse(dtype, case):
    g = torch.Generator().manual_seed(17)
    q, k, v = make_qkv(g, 2, 4, 2, 129, 190, 64, dtype, "cuda")
    variants = {} if case == "plain" else variant_kwargs(case, g, 2, 4, 129, 190, dtype, "cuda")
    kernel_grads(q, k, v, variants, use_lse=True, what=f"lse {case} {dtype}")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True, "bottom_right"])
def test_kernel_gradients_long(family, d, causal, fa_overrides):
    """Several key blocks and many query steps (the double-buffered loads), GQA."""
    if family == "sm90" and not on_hopper():
        pytest.skip("the Hopper kernels need compute capability 9.0")
    fa_overrides(family=family)
    g = torch.Generator().manual_seed(18)
    q, k, v = make_qkv(g, 1, 4, 2, 1000, 1100, d, torch.bfloat16, "cuda")
    kw = dict(causal=True, causal_align="bottom_right") if causal == "bottom_right" else dict(causal=causal)
    kernel_grads(q, k, v, kw, use_lse=False, what=f"{family} long d={d} causal={causal}")


def test_kernel_gradients_on_strided_views():
    g = torch.Generator().manual_seed(19)
    q, k, v = make_qkv(g, 2, 4, 2, 77, 91, 64, torch.float16, "cuda", layout="bnhd")
    kernel_grads(q, k, v, dict(causal=True), use_lse=True, what="bnhd views")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_kernel_takes_a_given_delta(dtype):
    """fa::backward with delta = rowsum(dO ∘ O) (a ring step's D) gives the gradients it gives without."""
    g = torch.Generator().manual_seed(20)
    q, k, v = make_qkv(g, 2, 4, 2, 150, 170, 64, dtype, "cuda")
    out, lse = torch.ops.fa.forward_lse(q, k, v, None, True)
    dout = torch.randn(out.shape, generator=g).to("cuda", dtype)
    delta = (dout.float() * out.float()).sum(-1)
    before = torch_flashattn.stats()["exact"]
    plain = torch.ops.fa.backward(dout, q, k, v, out, lse, None, None, True)
    given = torch.ops.fa.backward(dout, q, k, v, out, lse, None, None, True, delta=delta)
    assert torch_flashattn.stats()["exact"] == before
    for a, b in zip(plain[:3], given[:3]):
        torch.testing.assert_close(a.float(), b.float(), atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("d", [64, 128])
def test_kernel_gradients_key_mask_hides_whole_blocks(dtype, d):
    """key_mask hiding a whole CTA's keys (dK = dV = 0 there, nothing loaded), whole warps' keys, and
    one entry whose keys are all hidden (its rows see nothing: lse = −inf, zero gradients)."""
    g = torch.Generator().manual_seed(23)
    q, k, v = make_qkv(g, 3, 4, 2, 150, 300, d, dtype, "cuda")
    km = torch.rand(3, 300, generator=g) < 0.6
    km[0, :140] = False                                 # block 0 of 128 keys, and warps of block 1
    km[0, 200:216] = False
    km[1] = False
    km[2, 256:] = True
    kernel_grads(q, k, v, dict(key_mask=km.cuda(), causal=True, causal_align="bottom_right"), use_lse=True,
                 what=f"key_mask blocks {dtype} d={d}")


VARLEN_KERNEL_CASES = {
    "plain": lambda B, Hq, g: dict(),
    "causal_top_left": lambda B, Hq, g: dict(causal=True),
    "causal_bottom_right": lambda B, Hq, g: dict(causal=True, causal_align="bottom_right"),
    "window_softcap_sinks": lambda B, Hq, g: dict(window=(40, 7), softcap=3.0, sinks=torch.randn(Hq, generator=g)),
    "alibi_batch_causal": lambda B, Hq, g: dict(alibi_slopes=torch.rand(B, Hq, generator=g) * 0.2, causal=True),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("d", [40, 128])
@pytest.mark.parametrize("case", list(VARLEN_KERNEL_CASES))
def test_kernel_gradients_varlen(dtype, d, case):
    """Packed sequences on the kernel: several query and key blocks, an empty sequence, one query,
    more queries than keys, sequences that end mid-block (the next one's rows follow), GQA."""
    g = torch.Generator().manual_seed(seed_of("varlen kernel", case, d))
    lens_q, lens_k = [130, 0, 1, 200, 64, 77], [150, 5, 70, 200, 1, 300]
    before = torch_flashattn.stats()["exact"]
    check_varlen_grads(g, "cuda", dtype, VARLEN_KERNEL_CASES[case](len(lens_q), 4, g), lens_q, lens_k, 4, 2, d,
                       case != "plain", f"varlen kernel {case} {dtype} d={d}")
    assert torch_flashattn.stats()["exact"] == before, f"varlen {case}: the backward left the kernel"


def test_kernel_varlen_bad_cu_seqlens_give_nan():
    """cu_seqlens that break the rules (a sequence past max_seqlen): the forward's output is NaN, and
    every gradient is NaN too, as on the exact path, with no host read."""
    g = torch.Generator().manual_seed(24)
    q = torch.randn(40, 2, 64, generator=g).to("cuda", torch.bfloat16).requires_grad_(True)
    k, v = (torch.randn(40, 1, 64, generator=g).to("cuda", torch.bfloat16).requires_grad_(True) for _ in range(2))
    sinks = torch.randn(2, generator=g).cuda().requires_grad_(True)
    cu = torch.tensor([0, 30, 40], dtype=torch.int32, device="cuda")           # 30 > max_seqlen 20
    before = torch_flashattn.stats()["exact"]
    out = torch_flashattn.attention_varlen(q, k, v, cu, cu, 20, 20, sinks=sinks)
    grads = torch.autograd.grad(out.float().sum(), (q, k, v, sinks))
    assert torch_flashattn.stats()["exact"] == before
    for name, t in zip(("dq", "dk", "dv", "dsinks"), grads):
        assert t.isnan().all(), f"{name} is not all NaN"


@pytest.mark.parametrize("what", ["d=160", "attn_mask", "fp32", "family simt"])
def test_calls_the_kernel_does_not_take_are_exact_and_counted(what, fa_overrides):
    g = torch.Generator().manual_seed(21)
    d = 160 if what == "d=160" else 64
    dtype = torch.float32 if what == "fp32" else torch.bfloat16
    q, k, v = make_qkv(g, 1, 2, 1, 40, 50, d, dtype, "cuda")
    variants = {"attn_mask": dict(attn_mask=(torch.rand(40, 50, generator=g) < 0.7).cuda())}.get(what, {})
    if what == "family simt":
        fa_overrides(family="simt")
    before = torch_flashattn.stats()["exact"]
    check_grads(q, k, v, variants, False, what)
    assert torch_flashattn.stats()["exact"] > before, f"{what}: expected the exact path"


def test_deterministic_mode_takes_the_exact_path():
    """Under torch.use_deterministic_algorithms(True) CUDA gradients are bit-identical run to run: the
    exact path computes them (the kernel's dQ atomics add in a varying order), counted."""
    g = torch.Generator().manual_seed(22)
    q, k, v = make_qkv(g, 2, 4, 2, 300, 300, 64, torch.bfloat16, "cuda")
    dout = torch.randn(q.shape, generator=g).to("cuda", torch.bfloat16)
    leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
    on, warn_only = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)     # cuBLAS's workspace setting: a warning
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            before = torch_flashattn.stats()["exact"]
            runs = [torch.autograd.grad(torch_flashattn.attention(*leaves, causal=True), leaves, dout) for _ in range(2)]
            assert torch_flashattn.stats()["exact"] == before + 2
    finally:
        torch.use_deterministic_algorithms(on, warn_only=warn_only)
    for a, b in zip(*runs):
        assert torch.equal(a, b)
    kernel = torch.autograd.grad(torch_flashattn.attention(*leaves, causal=True), leaves, dout)
    for a, b in zip(runs[0], kernel):
        torch.testing.assert_close(a.float(), b.float(), atol=3e-2, rtol=3e-2)


@pytest.mark.parametrize("variants", [{}, "sinks_key_mask"], ids=["plain", "sinks_key_mask"])
def test_training_step_in_a_cuda_graph(variants):
    """Forward and backward captured in one CUDA graph (static inputs, the workspace from the caching
    allocator, no host synchronisation): replayed on new values, the gradients are those of an
    uncaptured step, and the kernel computed them."""
    g = torch.Generator().manual_seed(25)
    q, k, v = make_qkv(g, 2, 4, 2, 200, 260, 64, torch.bfloat16, "cuda")
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
    kw = dict(causal=True)
    if variants:
        kw.update(sinks=torch.randn(4, generator=g).cuda().requires_grad_(True),
                  key_mask=(torch.rand(2, 260, generator=g) < 0.8).cuda())
        leaves.append(kw["sinks"])
    dout = torch.randn(q.shape, generator=g).to("cuda", torch.bfloat16)

    def step():
        return torch.autograd.grad(torch_flashattn.attention(*leaves[:3], **kw), leaves, dout)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):                       # warm-up off the capture stream, as torch asks
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    before = torch_flashattn.stats()["exact"]
    with torch.cuda.graph(graph):
        captured = step()
    fresh = make_qkv(g, 2, 4, 2, 200, 260, 64, torch.bfloat16, "cuda")
    with torch.no_grad():
        for t, n in zip(leaves, fresh):
            t.copy_(n)
    graph.replay()
    torch.cuda.synchronize()
    assert torch_flashattn.stats()["exact"] == before, "the captured backward left the kernel"
    for a, b in zip(captured, step()):                 # dQ's and dsinks' atomics add in any order
        torch.testing.assert_close(a.float(), b.float(), atol=1e-2, rtol=1e-2)
