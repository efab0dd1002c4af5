"""Extreme values on every kernel family (CPU backend, CUDA auto, sm80, fp32, simt): large logits,
tiny and huge scales, values near the dtype's overflow, and ±inf / NaN inputs beyond those of
test_forward.py::test_nonfinite_inputs_match_sdpa.

Finite inputs must give finite outputs wherever SDPA's math is finite, within the suite's accuracy
rule (conftest.assert_accurate). Non-finite inputs must give NaN / inf in the same rows as SDPA.
"""
import pytest
import torch
import torch.nn.functional as F

import torch_flashattn
from conftest import KERNELS, SLACK, poison_scores, pytorch_same_dtype, reference, reference_lse, use_kernel

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def check(out, q, k, v, causal=False, scale=None, unit=1.0, floor=0.0, what=""):
    """conftest.assert_accurate with errors in units of `unit` (v's magnitude) and an extra
    allowance `floor` (same units) for the rounding of the scores themselves."""
    assert torch.isfinite(out).all(), f"{what}: non-finite output"
    ref = reference(q, k, v, causal, scale)
    pt = pytorch_same_dtype(q, k, v, causal, scale)
    assert torch.isfinite(pt).all(), f"{what}: PyTorch's own SDPA is not finite here"
    err = (out.double() - ref).abs().max().item() / unit
    err_pt = (pt.double() - ref).abs().max().item() / unit
    bound = 2 * err_pt + SLACK[q.dtype] + floor
    assert err <= bound, (f"{what}: our max error {err:.3e} > 2 × PyTorch's {err_pt:.3e} + slack + score floor "
                          f"{floor:.3e} = {bound:.3e} (× {unit:g})")


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("what,qk_mult,scale", [
    ("q,k x10: logits x100", 10.0, None),
    ("q,k x100: logits x1e4", 100.0, None),
    ("scale 1e-6: near-uniform softmax", 1.0, 1e-6),
    ("scale 1e3: near one-hot softmax", 1.0, 1e3),
])
def test_extreme_logits(kernel, dtype, causal, what, qk_mult, scale, fa_overrides):
    """Logits from ~1e-6 to ~1e4: exp2 arguments far from 0, running maxima that jump by
    thousands, and sums of nearly equal terms. Finite everywhere, exact by the rule, with one
    allowance: at |S| ~ 1e4 every fp32 implementation (PyTorch's included) rounds a score by
    ~|S|·2⁻²⁴ ≈ 1e-3, which moves a near-tie row's output by up to that times max|v|. Both
    errors are then that rounding noise and their ratio is a coin toss, so the bound adds
    max|S| · 2⁻²⁴ · max|v| (negligible at ordinary logits)."""
    device = use_kernel(kernel, dtype, fa_overrides)
    torch.manual_seed(21)
    q = (torch.randn(2, 4, 97, 64) * qk_mult).to(device=device, dtype=dtype)
    k = (torch.randn(2, 2, 150, 64) * qk_mult).to(device=device, dtype=dtype)
    v = torch.randn(2, 2, 150, 64).to(device=device, dtype=dtype)
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal, scale=scale)
    assert torch.isfinite(lse).all(), f"{what}: non-finite lse"
    s_max = (q.double() @ k.double().repeat_interleave(2, dim=1).transpose(-1, -2)).abs().max().item()
    s_max *= 64 ** -0.5 if scale is None else scale
    check(out, q, k, v, causal, scale, floor=s_max * 2 ** -24 * v.abs().max().item(), what=what)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_near_overflow(kernel, dtype, fa_overrides):
    """Inputs near the dtype's largest value (bf16 and fp32: 3.4e38; fp16: 65504). q and k are as
    large as keeps the unscaled q·k finite in fp32 (a fused kernel computes it before the scale),
    the scale brings the logits back to O(1), and v is as large as keeps Σ P V finite for Nk = 64
    (the online softmax sums unnormalized terms, each ≤ 1, before dividing: a kernel limit shared
    with FlashAttention, README "Limits")."""
    device = use_kernel(kernel, dtype, fa_overrides)
    torch.manual_seed(22)
    if dtype == torch.float16:
        qk, v_unit = 100.0, 1e4           # q·k terms ~1e4 (fp32), |v| ≤ ~5e4 < 65504
    else:
        qk, v_unit = 1e17, 1e36           # q·k terms ~1e34 (sum ~1e35), 64 · |v| ≤ ~3e38
    d = 64
    scale = 1.0 / (qk * qk * d ** 0.5)
    q = (torch.randn(1, 2, 33, d, dtype=torch.float64) * qk).to(device=device, dtype=dtype)
    k = (torch.randn(1, 2, 64, d, dtype=torch.float64) * qk).to(device=device, dtype=dtype)
    v = (torch.randn(1, 2, 64, d, dtype=torch.float64).clamp(-4, 4) * v_unit).to(device=device, dtype=dtype)
    assert torch.isfinite(q).all() and torch.isfinite(v).all()
    out, lse = torch_flashattn.attention_lse(q, k, v, scale=scale)
    assert torch.isfinite(lse).all(), "non-finite lse"
    check(out, q, k, v, scale=scale, unit=v_unit, what=f"{dtype} near overflow")


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nonfinite_keys_and_values(kernel, dtype, fa_overrides):
    """±inf in k and NaN in v, without a mask (every row sees every key, so SDPA's math and fused
    backends agree): +inf in k[j, c] makes score j +inf for rows with q[c] > 0 (softmax inf − inf:
    NaN rows) and −inf for rows with q[c] < 0 (key j gets weight 0: finite rows). A NaN value
    poisons every row. Finite rows are exact."""
    device = use_kernel(kernel, dtype, fa_overrides)
    torch.manual_seed(23)
    q, k, v = (torch.randn(1, 3, 40, 32).to(device=device, dtype=dtype) for _ in range(3))
    k[0, 0, 11, 5] = float("inf")
    k[0, 1, 30, 2] = float("-inf")
    v[0, 2, 7, 0] = float("nan")
    out = torch_flashattn.attention(q, k, v)
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        math = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
    nan_rows = out.isnan().any(-1)
    assert torch.equal(nan_rows, math.isnan().any(-1)), "NaN rows differ from SDPA's"
    # Head 0: NaN exactly where q[:, 5] > 0; head 1 where q[:, 2] < 0; head 2 everywhere.
    assert torch.equal(nan_rows[0, 0], q[0, 0, :, 5] > 0) and torch.equal(nan_rows[0, 1], q[0, 1, :, 2] < 0)
    assert nan_rows[0, 2].all()
    assert torch.equal(out.isnan(), math.isnan()), "NaN pattern within rows differs from SDPA's"
    finite = ~nan_rows[..., None].expand_as(out)
    assert torch.isfinite(out[finite]).all()
    err = (out.double() - math)[finite].abs().max().item()
    assert err < (1e-5 if dtype == torch.float32 else 2e-2), f"finite rows: max difference {err:.2e}"


# Forced plans of the split-KV route (attention calls with few query rows per KV head, and fp32 calls
# with long keys): each way the splits merge.
MERGES = {"auto": {},
          "one": dict(decode_splits=1),
          "cluster": dict(decode_splits=4, decode_cluster="on"),
          "elem": dict(decode_splits=4, decode_cluster="off", decode_combine="elem"),
          "wide": dict(decode_splits=40, decode_cluster="off", decode_combine="wide")}


@pytest.mark.gpu
@pytest.mark.parametrize("merge", ["one", "cluster", "elem", "wide"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_nonfinite_rows_decode_route(dtype, merge, fa_overrides):
    """A decoding step (one query per head, 4096 keys) runs on the split-KV kernel: NaN and ±inf in
    q or k must give NaN output (and NaN lse) in exactly SDPA's NaN rows however the splits merge. A
    split that met a NaN score stored lse −inf ("no key"): one split gave lse −inf, merged splits
    gave rows of 0 (or a finite lse). The rows of conftest.poison_scores; the finite rows' output
    and lse are exact."""
    fa_overrides(family="auto", **MERGES[merge])
    torch.manual_seed(24)
    q = torch.randn(2, 4, 1, 64, device="cuda", dtype=dtype)
    k, v = (torch.randn(2, 2, 4096, 64, device="cuda", dtype=dtype) for _ in range(2))
    nan_rows = poison_scores(q, k)[..., None]
    out, lse = torch_flashattn.attention_lse(q, k, v)
    ref, ref_lse = reference(q, k, v), reference_lse(q, k)
    assert torch.equal(ref.isnan().any(-1).cpu(), nan_rows), "the poisoned rows"
    assert torch.equal(out.isnan(), ref.isnan()), "NaN rows differ from SDPA's"
    # lse NaN in the NaN rows, as the CPU backend gives it (float64 logsumexp reads +inf scores as +inf).
    assert torch.equal(lse.isnan(), ref.isnan().any(-1)), "NaN lse in other rows than the NaN output"
    fin = ~nan_rows.to(q.device)
    err = (out.double() - ref)[fin[..., None].expand_as(out)].abs().max().item()
    assert err < 2e-2, f"finite rows: max difference {err:.2e}"
    err_lse = (lse.double() - ref_lse)[fin].abs().max().item()
    assert err_lse < 1e-4, f"finite rows: lse max difference {err_lse:.2e}"


@pytest.mark.gpu
@pytest.mark.parametrize("merge", ["auto", "one", "elem", "wide"])
def test_nonfinite_key_fp32_long_keys(merge, fa_overrides):
    """fp32 with 40 000 keys and few query rows runs on the split-KV route's CUDA-core kernel: one
    NaN key makes every row NaN (output and lse), as in SDPA. That kernel read a NaN sum as "no
    key": rows of 0 with one split, and with several the NaN key's split dropped (finite rows)."""
    fa_overrides(family="auto", **MERGES[merge])
    torch.manual_seed(25)
    q = torch.randn(1, 1, 3, 32, device="cuda")
    k, v = (torch.randn(1, 1, 40000, 32, device="cuda") for _ in range(2))
    k[0, 0, 12345, 7] = float("nan")
    out, lse = torch_flashattn.attention_lse(q, k, v)
    assert out.isnan().all() and lse.isnan().all()


@pytest.mark.gpu
@pytest.mark.parametrize("scale", [1e38, -1e38])
@pytest.mark.parametrize("k_mag", [1e-30, 1e-39], ids=["scores_1e9", "scores_4"])
@pytest.mark.parametrize("route,dtype", [("fp32", torch.float32), ("auto", torch.float32), ("simt", torch.float32),
                                         ("simt", torch.bfloat16), ("long_keys", torch.float32)],
                         ids=lambda x: str(x).replace("torch.", ""))
def test_huge_scale_small_scores(route, dtype, k_mag, scale, fa_overrides):
    """Any scale up to ±2.3e38 is allowed and only scores past it overflow (test_bad_input.py's
    test_huge_scale_small_scores_on_the_cpu, on CUDA): the fp32 family (fp32.cu), the simt family
    (simt.cu) and the split-KV route's CUDA-core kernel (fp32 with 40 000 keys, non-causal) multiplied
    q by scale · log2 e first, which left a float at q = 10, scale 1e38: NaN scores, rows of NaN or 0.
    Past |scale · log2 e| = 1 the factor belongs on the scores. k of 1e-30 gives scores of about
    1e9 (one key takes each row, with P exactly 1), 1e-39 (subnormal, as any k must be for scores
    near 1 here) scores of about 4 (a spread softmax). "auto": fp32 at d ≤ 128, which fp32tc.cu
    takes only up to |scale · log2 e| = 2^64 (past it its tensor-core sums of products near FLT_MIN
    were 1 % off). Output and lse against float64."""
    fa_overrides(family={"long_keys": "auto"}.get(route, route))
    torch.manual_seed(26)
    nq, nk = (3, 40000) if route == "long_keys" else (70, 150)
    q = torch.full((1, 2, nq, 32), 10.0, dtype=dtype, device="cuda")
    q[:, :, 1::2] = -10.0
    k = (torch.randn(1, 2, nk, 32, dtype=torch.float64) * k_mag).to(device="cuda", dtype=dtype)
    v = torch.randn(1, 2, nk, 32, dtype=dtype, device="cuda")
    out, lse = torch_flashattn.attention_lse(q, k, v, scale=scale)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all(), "non-finite output or lse"
    ref, ref_lse = reference(q, k, v, scale=scale), reference_lse(q, k, scale=scale)
    tol = 1e-5 if dtype == torch.float32 else 2 ** -7
    torch.testing.assert_close(out.double(), ref, rtol=tol, atol=1e-5)
    torch.testing.assert_close(lse.double(), ref_lse, rtol=1e-6, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("scale", [1e15, -1e15])
def test_fp32tc_large_scale_large_q(scale, fa_overrides):
    """fp32tc.cu takes |scale · log2 e| up to 2^64: past 1 the factor goes on the scores, not on Q,
    which q = ±1e24 at scale 1e15 overflowed (scores of about 1e9: one key takes each row)."""
    fa_overrides(family="fp32tc")
    torch.manual_seed(27)
    q = torch.full((1, 2, 70, 32), 1e24, device="cuda")
    q[:, :, 1::2] = -1e24
    k = (torch.randn(1, 2, 150, 32, dtype=torch.float64) * 1e-30).to(device="cuda", dtype=torch.float32)
    v = torch.randn(1, 2, 150, 32, device="cuda")
    out, lse = torch_flashattn.attention_lse(q, k, v, scale=scale)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all(), "non-finite output or lse"
    torch.testing.assert_close(out.double(), reference(q, k, v, scale=scale), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse.double(), reference_lse(q, k, scale=scale), rtol=1e-6, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("family", ["sm90", "sm80", "turing"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("target", [4.008e8, 1e9, 1e10, 1e20], ids=lambda t: f"scores_{t:.0e}")
@pytest.mark.parametrize("d,causal", [(64, False), (128, True), (256, False)])
def test_huge_scores_plain_kernels(family, dtype, target, d, causal, fa_overrides):
    """The plain Hopper, sm_80 and Turing kernels at scores of 4e8 to 1e20 (README Limits): q, k, v randn
    (1, 4, 512, d), scale = target / the largest |q · k| (bench/log/2026-12-06-alibi-v3/score_limit.py),
    with the review's row planted (head 1, row 300: q = k_0 = 2.5, q · k_0 = 6.25 d exactly, the
    largest score): at 4.008e8 fl(m · c) is 22 below m · c, so the one-fma exponentials gave that
    row an fp16 P of inf. Past |m · c| = 2^20 (log2 units) the kernels take each exponent relative
    to m · c itself. Every row finite; the softmax is one-hot here, so out against the float64
    output directly, within two of the dtype's rounding steps at v's magnitude (rows whose two
    largest q · k lie within 1e-3, which fp32 sums may order either way, for finiteness only);
    lse within 1e-5 of the larger of |lse| and the row's largest scale · Σ_i |q_i k_i|."""
    device = use_kernel(f"cuda-{family}", dtype, fa_overrides)
    torch.manual_seed(d)
    q, k, v = (torch.randn(1, 4, 512, d, device=device).to(dtype) for _ in range(3))
    q[0, 1, 300] = 2.5
    k[0, 1, 0] = 2.5
    raw = q.double() @ k.double().transpose(-1, -2)
    if causal:
        raw = raw.masked_fill(torch.ones(512, 512, dtype=torch.bool, device=device).triu(1), float("-inf"))
    scale = target / raw[raw.isfinite()].abs().max().item()
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal, scale=scale)
    what = f"{family} {dtype} d={d} causal={causal} scores {target:.3g} (scale {scale:.4g})"
    rows_bad = (~torch.isfinite(out).all(-1)).sum().item()
    assert rows_bad == 0, f"{what}: {rows_bad} rows with inf or NaN"
    assert torch.isfinite(lse).all(), f"{what}: non-finite lse"
    top2 = raw.topk(2, dim=-1).values
    clear = (top2[..., 0] - top2[..., 1] > 1e-3) | (top2[..., 1] == float("-inf"))
    assert clear.float().mean().item() > 0.95
    err = (out.double() - reference(q, k, v, causal, scale)).abs().amax(-1)
    tol = 2 * torch.finfo(dtype).eps * v.abs().max().item()
    worst = err[clear].max().item()
    zero = ((out == 0).all(-1) & clear).sum().item()
    assert worst <= tol, f"{what}: max error {worst:.3e} > {tol:.3e} ({zero} rows all 0)"
    ref_lse = reference_lse(q, k, causal, scale)
    # Relative to the row's largest scale · Σ_i |q_i k_i| too, as test_huge_scores_variant_kernels
    # (a row of few keys, causal, may have its largest score far below what bounds its fp32 sum's error).
    mag = (q.double().abs() @ k.double().abs().transpose(-1, -2)).masked_fill(~raw.isfinite(), 0).amax(-1) * scale
    lse_err = ((lse.double() - ref_lse).abs() / torch.maximum(ref_lse.abs(), mag).clamp(min=1)).max().item()
    assert lse_err <= 1e-5, f"{what}: lse relative error {lse_err:.3e}"
