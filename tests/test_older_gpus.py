"""Every op on an older GPU's choice of kernels: fa_overrides.device_cc makes the CUDA backend plan as
a compute capability 7.5 (T4) or 8.6 GPU would (its families and its opt-in shared memory), so the
newer GPU here runs exactly the kernels that GPU would get. The Turing family itself (fp16 tensor
cores, compute_75 PTX JIT-compiled here) also runs the whole forward suite through KERNELS
(conftest.py); this file checks the automatic choice and the ops around it.

Which family ran is checked bit for bit against that family forced: the kernels are deterministic."""
import pytest
import torch

import torch_flashattn
from conftest import assert_accurate, randn, reference_lse
from test_backward import check_grads
from test_kvcache import assert_accurate as assert_kvcache_accurate
from test_variants import assert_variant_accurate

# (device_cc, dtype) -> the family the automatic choice must take for a plain forward.
EXPECTED = {
    (75, torch.float16): "turing",
    (75, torch.bfloat16): "simt",
    (75, torch.float32): "simt",
    (86, torch.float16): "sm80",
    (86, torch.bfloat16): "sm80",
}


def run_forward(q, k, v, causal, **ov):
    with torch_flashattn._testing.overrides(**ov):
        return torch.ops.fa.forward(q, k, v, causal=causal)


@pytest.mark.gpu
@pytest.mark.parametrize("cc, dtype", list(EXPECTED), ids=[f"cc{c}-{str(t)[6:]}" for c, t in EXPECTED])
@pytest.mark.parametrize("d", [40, 64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_forward_takes_the_older_gpus_family(cc, dtype, d, causal):
    torch.manual_seed(d + 7 * causal + cc)
    q = randn(2, 4, 77, d, dtype=dtype, device="cuda")
    k = randn(2, 2, 131, d, dtype=dtype, device="cuda")
    v = randn(2, 2, 131, d, dtype=dtype, device="cuda")
    out = run_forward(q, k, v, causal, device_cc=cc)
    assert_accurate(out, q, k, v, causal, what=f"cc {cc} {dtype} d={d}")
    forced = run_forward(q, k, v, causal, family=EXPECTED[(cc, dtype)])
    assert torch.equal(out, forced), f"cc {cc}, {dtype}: not the {EXPECTED[(cc, dtype)]} family's result"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_simt_d256_fits_turing_shared_memory(dtype):
    """d = 256 on the CUDA-core kernel needs 82 KB of shared memory; under 7.5's 64 KB it loads V
    into K's buffer instead. Both layouts give the same numbers."""
    torch.manual_seed(3)
    q, k, v = (randn(1, 2, 200, 256, dtype=dtype, device="cuda") for _ in range(3))
    a = run_forward(q, k, v, True, family="simt", device_cc=75)
    b = run_forward(q, k, v, True, family="simt")
    assert_accurate(a, q, k, v, True, what="simt d=256 at 64 KB")
    assert torch.equal(a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_every_op_at_cc75(dtype):
    """lse, the KV cache (append + decode), packed sequences, variants and gradients on a 7.5 GPU's
    kernels; the variants take the exact path there, counted."""
    torch.manual_seed(11)
    dev = "cuda"
    with torch_flashattn._testing.overrides(device_cc=75):
        q = randn(2, 4, 33, 64, dtype=dtype, device=dev)
        k = randn(2, 2, 50, 64, dtype=dtype, device=dev)
        v = randn(2, 2, 50, 64, dtype=dtype, device=dev)
        out, lse = torch_flashattn.attention_lse(q, k, v, causal=True)
        assert_accurate(out, q, k, v, True, what="attention_lse")
        assert (lse.double() - reference_lse(q, k, True)).abs().max().item() < 1e-3

        # KV cache: append 3 keys to ragged caches, then attend (split-KV's CUDA-core kernel).
        nmax = 300
        kc = torch.zeros(2, 2, nmax, 64, dtype=dtype, device=dev)
        vc = torch.zeros_like(kc)
        kc[:, :, :250] = randn(2, 2, 250, 64, dtype=dtype, device=dev)
        vc[:, :, :250] = randn(2, 2, 250, 64, dtype=dtype, device=dev)
        lens = torch.tensor([250, 97], dtype=torch.int32, device=dev)
        kn, vn = randn(2, 2, 3, 64, dtype=dtype, device=dev), randn(2, 2, 3, 64, dtype=dtype, device=dev)
        qd = randn(2, 4, 3, 64, dtype=dtype, device=dev)
        o = torch_flashattn.attention_kvcache(qd, kc, vc, cache_seqlens=lens, k_new=kn, v_new=vn, causal=True)
        lengths = [int(n) + 3 for n in lens]
        for b, L in enumerate(lengths):
            assert torch.equal(kc[b, :, L - 3:L], kn[b]) and torch.equal(vc[b, :, L - 3:L], vn[b])
        assert_kvcache_accurate(o, qd, kc, vc, lengths, True, None, what="kvcache")

        # The KV cache with a window and a softcap: the exact path on this GPU, counted.
        before = torch.ops.fa._exact_calls()
        ov = torch_flashattn.attention_kvcache(qd, kc, vc, cache_seqlens=lens + 3, causal=True, window=(40, 0),
                                               softcap=20.0)
        assert torch.ops.fa._exact_calls() > before
        for b, L in enumerate(lengths):
            assert_variant_accurate(ov[b:b + 1], None, qd[b:b + 1], kc[b:b + 1, :, :L], vc[b:b + 1, :, :L],
                                    what=f"kvcache variants entry {b}", causal=True, causal_align="bottom_right",
                                    window=(40, 0), softcap=20.0)

        # A sliding window: the exact path on this GPU, counted.
        before = torch.ops.fa._exact_calls()
        ow = torch_flashattn.attention(q, k, v, window=(8, 0))
        assert torch.ops.fa._exact_calls() > before
        assert_variant_accurate(ow, None, q, k, v, what="window", window=(8, 0))

        cu = torch.tensor([0, 20, 33], dtype=torch.int32, device=dev)
        qp, kp, vp = (randn(33, 4, 64, dtype=dtype, device=dev) for _ in range(3))
        op = torch_flashattn.attention_varlen(qp, kp, vp, cu, cu, 20, 20, causal=True)
        for s, e in ((0, 20), (20, 33)):
            seg = lambda t: t[s:e].transpose(0, 1)[None]      # noqa: E731
            assert_accurate(seg(op), seg(qp), seg(kp), seg(vp), True, what=f"varlen [{s}, {e})")

        # Gradients, by the rule of test_backward.py.
        check_grads(q, k, v, {"causal": True}, use_lse=False, what="gradients at 7.5")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", ["causal", "key_mask_softcap"])
def test_gradients_at_cc86(dtype, case):
    """On an 8.6 GPU (99 KB of shared memory per block) the sm_80 backward takes d = 64 on its smaller
    tile (sm80_backward.cu's bwd_tile_d64_small) and computes d = 128 exactly, counted."""
    if torch.cuda.get_device_capability() < (8, 6):
        pytest.skip("plans as an 8.6 GPU only on 8.6 and newer")
    torch.manual_seed(86 + len(case))
    B, Hq, Hkv, Nq, Nk = 2, 4, 2, 150, 203
    variants = {"causal": True}
    if case == "key_mask_softcap":
        km = torch.rand(B, Nk, device="cuda") > 0.3
        km[:, 0] = True
        variants = {"key_mask": km, "softcap": 20.0, "window": (60, 10)}
    for d, kernel in ((64, True), (128, False)):
        q = randn(B, Hq, Nq, d, dtype=dtype, device="cuda")
        k = randn(B, Hkv, Nk, d, dtype=dtype, device="cuda")
        v = randn(B, Hkv, Nk, d, dtype=dtype, device="cuda")
        with torch_flashattn._testing.overrides(device_cc=86):
            before = torch_flashattn.stats()["exact"]
            check_grads(q, k, v, variants, use_lse=False, what=f"gradients at 8.6, d = {d}, {case}")
            moved = torch_flashattn.stats()["exact"] > before
        assert moved != kernel, f"d = {d}: expected the {'kernel' if kernel else 'exact path'}"


@pytest.mark.parametrize("cc", [60, 76, 90])
def test_device_cc_is_checked(cc):
    """Only compute capabilities below Hopper that GPUs have (fa_set_overrides); nothing changes."""
    before = torch_flashattn._testing.get()
    with pytest.raises(ValueError, match="device_cc"):
        with torch_flashattn._testing.overrides(device_cc=cc):
            pass
    assert torch_flashattn._testing.get() == before
