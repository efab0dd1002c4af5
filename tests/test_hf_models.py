# The transformers model battery (tests/hf_models.py) under torch_flashattn's attention backend: each
# tiny random model against its reference attention implementation, in fp32 on the CPU and, where a
# CUDA device is present, in bf16 on it.
#     python3 -m pytest -q -s tests/test_hf_models.py     (-s prints the share of calls our kernels served)
import pytest
import torch

transformers = pytest.importorskip("transformers")

from packaging.version import Version  # noqa: E402

import hf_models  # noqa: E402
import torch_flashattn  # noqa: E402
import torch_flashattn.hf  # noqa: E402

# fp32: an absolute bound on max |ours - reference| (logits reach about 10 here; the largest
# difference measured on the CPU was 1.1e-5). bf16: the slack added to 2 × the reference's own bf16
# error, which was 3.6e-3 or more on every model here (CPU and H200).
SLACK = {torch.float32: 5e-5, torch.bfloat16: 1e-3}

SETTINGS = [pytest.param("cpu", torch.float32, id="cpu-fp32"),
            pytest.param("cuda", torch.bfloat16, id="cuda-bf16", marks=pytest.mark.gpu)]


# Every architecture of the battery calls attention through ALL_ATTENTION_FUNCTIONS from this release.
ROUTED_SINCE = "5.24"


def served_share(stats):
    """Our kernels' share of the attention calls, and the number of calls. "fa" counts the calls our
    kernels served ("fa_*" keys count subsets of them); every other count is a call another path served
    (PyTorch's SDPA, the model's eager attention, ...)."""
    counts = {k: v for k, v in stats.items() if isinstance(v, int)}
    total = counts.get("fa", 0) + sum(v for k, v in counts.items() if not k.startswith("fa"))
    return (counts.get("fa", 0) / total if total else 0.0), total


@pytest.mark.parametrize("device,dtype", SETTINGS)
@pytest.mark.parametrize("spec", hf_models.MODELS, ids=[s.name for s in hf_models.MODELS])
def test_model(spec, device, dtype):
    name = torch_flashattn.hf.register()
    torch_flashattn.reset_stats()
    results = hf_models.compare(spec, name, device, dtype)
    stats = torch_flashattn.stats()
    share, total = served_share(stats)
    print(f"\n{spec.name} ({device}, {dtype}): our kernels served {share:.0%} of {total} attention calls; "
          f"fallbacks {stats.get('fallback_reasons')}; " +
          "; ".join(f"{check} " + " ".join(f"{k}={v:.1e}" if isinstance(v, float) else f"{k}={v}"
                                            for k, v in r.items()) for check, r in results.items()))
    if total == 0 and Version(transformers.__version__) < Version(ROUTED_SINCE):
        # Older releases ran some of these (GPT-J and the T5 family in 5.17) on their own attention
        # code, which no attn_implementation reaches; the checks above then compare that code with
        # itself.
        pytest.skip(f"transformers {transformers.__version__} runs {spec.name}'s attention itself")
    assert total > 0, f"{spec.name}: no attention call reached the backend"
    # Unpadded, padded and generation calls alike: at least 98 % on our kernels (every call today).
    assert share >= 0.98, f"{spec.name}: our kernels served {share:.0%}; {stats.get('fallback_reasons')}"

    bounds = {}
    for check in ("forward", "padded"):
        if check in results:
            r = results[check]
            bounds[check] = 2 * r["ref_err"] + SLACK[dtype]
            assert r["err"] <= bounds[check], (f"{spec.name} {check}: max error {r['err']:.2e} > 2 × the "
                                               f"reference's {r['ref_err']:.2e} + slack = {bounds[check]:.2e}")
    for check, forward in (("generate", "forward"), ("generate_padded", "padded")):
        if check in results:
            r = results[check]
            if dtype == torch.float32:
                assert r["tokens_equal"], f"{spec.name} {check}: tokens differ from step {r['first_diff']}"
                assert r["err"] <= SLACK[dtype], f"{spec.name} {check}: logits differ by {r['err']:.2e}"
            else:
                # Rounding may flip a near tie: where the tokens part, the reference's own logits must
                # rank the two tokens within the bf16 error bound.
                assert r["margin"] <= bounds[forward], (
                    f"{spec.name} {check}: tokens part at step {r['first_diff']} with a reference logit margin "
                    f"{r['margin']:.2e} > the bf16 error bound {bounds[forward]:.2e}")
