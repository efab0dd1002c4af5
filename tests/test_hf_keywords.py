"""The transformers backend's keyword contract: every keyword the installed transformers' attention call
sites pass is listed in ``torch_flashattn.hf.KEYWORDS`` (so a release that adds one fails here instead of
giving wrong numbers), every keyword an eager attention function reads is computed or sent to eager,
and each path gives the reference's numbers on random inputs.

    python3 -m pytest -q tests/test_hf_keywords.py
"""
import ast
import functools
import os
import types

import pytest
import torch

import torch_flashattn
from conftest import randn

transformers = pytest.importorskip("transformers")
import torch_flashattn.hf as hf  # noqa: E402
from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: E402

ROOT = os.path.dirname(transformers.__file__)
# Keywords whose value changes the result, so they may not be "in the mask" or "not an attention input".
COMPUTED_OR_EAGER = {"attention_mask", "dropout", "scaling", "is_causal", "position_bias", "indices",
                     "block_indices", "softcap", "s_aux", "sinks", "output_attentions"}


@functools.cache
def _modeling_trees():
    """(path, syntax tree) of every transformers source file that takes attention from the interface."""
    trees = []
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py") and not f.startswith("modular_"):   # modular_*: generators of modeling_*
                path = os.path.join(dirpath, f)
                src = open(path, encoding="utf-8").read()
                if "ALL_ATTENTION_FUNCTIONS" in src:
                    trees.append((os.path.relpath(path, ROOT), ast.parse(src)))
    return trees


def call_site_keywords():
    """{keyword: [files]} over every call of a function taken from ALL_ATTENTION_FUNCTIONS, and how many
    call sites there are."""
    found, sites = {}, 0
    for rel, tree in _modeling_trees():
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            names = set()
            for node in ast.walk(fn):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None \
                        and "ALL_ATTENTION_FUNCTIONS" in ast.unparse(node.value):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names |= {t.id for t in targets if isinstance(t, ast.Name)}
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names:
                    sites += 1
                    for kw in node.keywords:
                        if kw.arg is not None:
                            found.setdefault(kw.arg, []).append(rel)
    return found, sites


def eager_reads():
    """{keyword: [files]} of the keywords eager attention functions read: named parameters used in
    the body, and kwargs.get / kwargs[...] lookups."""
    found = {}
    for rel, tree in _modeling_trees():
        for fn in tree.body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name.endswith("eager_attention_forward")):
                continue
            used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
            params = [a.arg for a in fn.args.args + fn.args.kwonlyargs][5:]   # after module, q, k, v, mask
            keys = [a for a in params if a in used]
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and node.func.attr in ("get", "pop") and ast.unparse(node.func.value) == "kwargs":
                    keys.append(ast.literal_eval(node.args[0]))
                if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "kwargs":
                    keys.append(ast.literal_eval(node.slice))
            for k in keys:
                found.setdefault(k, []).append(rel)
    return found


def test_every_call_site_keyword_is_handled():
    found, sites = call_site_keywords()
    assert sites > 100, f"only {sites} attention call sites found: the scan no longer matches transformers"
    # Keywords that reach the function through **kwargs (the models' typed keyword bundles).
    from transformers.modeling_flash_attention_utils import FlashAttentionKwargs
    from transformers.utils.generic import TransformersKwargs
    typed = set(TransformersKwargs.__annotations__) | set(FlashAttentionKwargs.__annotations__)
    positional = {"query", "key", "value", "attention_mask"}    # passed by name at a few call sites
    missing = {k: v[:3] for k, v in found.items() if k not in hf.KEYWORDS and k not in positional}
    missing.update({k: ["TransformersKwargs"] for k in typed if k not in hf.KEYWORDS})
    assert not missing, f"keywords the backend does not handle (add them to hf.KEYWORDS): {missing}"
    print(f"\n{sites} call sites, {len(found)} keywords: {sorted(found)}")


def test_every_keyword_eager_reads_is_computed():
    reads = eager_reads()
    assert "softcap" in reads and "position_bias" in reads, "the eager scan no longer matches transformers"
    wrong = {k: v[:3] for k, v in reads.items() if k not in COMPUTED_OR_EAGER}
    assert not wrong, f"eager attention reads keywords the backend treats as having no effect: {wrong}"
    assert COMPUTED_OR_EAGER <= set(hf.KEYWORDS)


# ---- each path against its reference on random inputs ---------------------------------------

def module(hq=4, hkv=2, d=16, causal=True):
    return types.SimpleNamespace(num_key_value_groups=hq // hkv, head_dim=d, is_causal=causal, training=False)


def qkv(b=2, hq=4, hkv=2, nq=13, nk=13, d=16):
    return randn(b, hq, nq, d), randn(b, hkv, nk, d), randn(b, hkv, nk, d)


def padding_mask(b, nq, nk):
    keep = torch.ones(b, 1, nq, nk, dtype=torch.bool).tril(nk - nq)
    keep[1, :, :, :3] = False
    keep[1, :, :3, :] = True   # left padding: padded rows attend to something, as transformers arranges
    return keep


@pytest.fixture(autouse=True)
def fresh_stats():
    torch_flashattn.reset_stats()


@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_position_bias_matches_transformers_sdpa(with_mask, causal):
    torch.manual_seed(3)
    q, k, v = qkv()
    m = module(causal=causal)
    bias = randn(1, 4, 13, 13)
    mask = padding_mask(2, 13, 13) if with_mask else None
    ours, _ = hf.attention_forward(m, q, k, v, mask, scaling=0.3, position_bias=bias)
    ref, _ = sdpa_attention_forward(m, q, k, v, mask, scaling=0.3, position_bias=bias)
    torch.testing.assert_close(ours, ref)
    stats = torch_flashattn.stats()
    assert stats["fa"] == 1 and stats["fallback_reasons"] == {}, "the bias as the op's attn_mask"


def test_position_bias_with_gradients_goes_to_sdpa():
    """Training (a gradient to compute): the bias is folded into SDPA's mask, counted."""
    torch.manual_seed(4)
    q, k, v = (t.requires_grad_() for t in qkv())
    bias = randn(1, 4, 13, 13)
    ours, _ = hf.attention_forward(module(), q, k, v, None, scaling=0.3, position_bias=bias)
    ref, _ = sdpa_attention_forward(module(), q, k, v, None, scaling=0.3, position_bias=bias)
    torch.testing.assert_close(ours, ref)
    assert torch_flashattn.stats()["fallback_reasons"] == {"keyword position_bias": 1}


def bare_attention(cls):
    """An attention module of a transformers class, without its weights: what attention_forward reads
    of it (the class, for its eager function, and the GQA group, head dim and causal flag)."""
    m = cls.__new__(cls)
    torch.nn.Module.__init__(m)
    m.num_key_value_groups, m.head_dim, m.is_causal = 2, 16, True
    return m


CAUSAL = torch.ones(13, 13, dtype=torch.bool).tril()[None, None]


def eager_reference(m, q, k, v, mask, scaling, softcap=None, sinks=None):
    """softmax(softcap(q kᵀ · scale) + mask, with a sink column) v in float64."""
    g = q.shape[1] // k.shape[1]
    kk, vv = (t.double().repeat_interleave(g, dim=1) for t in (k, v))
    s = q.double() @ kk.transpose(-1, -2) * scaling
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    if sinks is not None:
        s = torch.cat([s, sinks.double().reshape(1, -1, 1, 1).expand(*s.shape[:-1], 1)], dim=-1)
    p = torch.softmax(s, dim=-1)[..., :kk.shape[2]]
    return (p @ vv).transpose(1, 2)


@pytest.mark.parametrize("with_mask", [False, True])
def test_softcap_runs_in_the_op(with_mask):
    """Gemma 2's softcap: torch_flashattn.attention's own softcap, with the mask or the causal flag."""
    from transformers.models.gemma2 import modeling_gemma2
    torch.manual_seed(4)
    q, k, v = qkv()
    m = bare_attention(modeling_gemma2.Gemma2Attention)
    mask = padding_mask(2, 13, 13) if with_mask else None
    ours, weights = hf.attention_forward(m, q, k, v, mask, scaling=0.25, softcap=5.0)
    ref = eager_reference(m, q, k, v, mask if with_mask else CAUSAL, 0.25, softcap=5.0)
    torch.testing.assert_close(ours.double(), ref, atol=1e-5, rtol=1e-5)
    assert weights is None
    assert torch_flashattn.stats()["fa"] == 1 and torch_flashattn.stats()["fallback_reasons"] == {}


def eager_grads(m, q, k, v, mask, scaling, d_out, softcap=None, sinks=None):
    """Gradients of Σ eager_reference · d_out in float64 with respect to q, k, v (and sinks)."""
    leaves = [t.detach().double().requires_grad_(True) for t in (q, k, v)]
    if sinks is not None:
        leaves.append(sinks.detach().double().requires_grad_(True))
    out = eager_reference(m, *leaves[:3], mask, scaling, softcap=softcap, sinks=leaves[3] if sinks is not None else None)
    return torch.autograd.grad((out * d_out.double()).sum(), leaves)


@pytest.mark.parametrize("mask_kind", ["causal", "dense", "structured"])
def test_softcap_with_gradients_runs_in_the_op(mask_kind):
    """Training Gemma 2 (inputs that need a gradient): the op's softcap and its backward, with the
    causal flag, a dense mask, or a StructuredMask (key_mask in the backward kernel); the gradients
    are autograd's through the eager computation. Dropout still takes the model's eager function."""
    from transformers.models.gemma2 import modeling_gemma2
    torch.manual_seed(4)
    q, k, v = qkv()
    m = bare_attention(modeling_gemma2.Gemma2Attention)
    dense = padding_mask(2, 13, 13)
    if mask_kind == "structured":                        # right padding: causal and key_mask
        key_mask = torch.ones(2, 13, dtype=torch.bool)
        key_mask[1, 10:] = False
        dense = CAUSAL & key_mask[:, None, None, :]
    mask = {"causal": None, "dense": dense,
            "structured": hf.StructuredMask(dense[:, 0, -1], True, None, 0, 0, 13, 13, lambda: dense)}[mask_kind]
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    ours, weights = hf.attention_forward(m, *leaves, mask, scaling=0.25, softcap=5.0)
    assert weights is None and torch_flashattn.stats()["fa"] == 1
    ref_mask = CAUSAL if mask_kind == "causal" else dense
    torch.testing.assert_close(ours.detach().double(), eager_reference(m, q, k, v, ref_mask, 0.25, softcap=5.0),
                               atol=1e-5, rtol=1e-5)
    d_out = randn(*ours.shape)
    got = torch.autograd.grad((ours * d_out).sum(), leaves)
    for name, a, r in zip("qkv", got, eager_grads(m, q, k, v, ref_mask, 0.25, d_out, softcap=5.0)):
        torch.testing.assert_close(a.double(), r, atol=1e-4, rtol=1e-4, msg=f"d{name}")
    assert torch_flashattn.stats()["fallback_reasons"] == {}
    hf.attention_forward(m, q, k, v, None, scaling=0.25, softcap=5.0, dropout=0.1)
    assert torch_flashattn.stats()["eager"] == 1
    assert torch_flashattn.stats()["fallback_reasons"] == {"keyword softcap": 1}

    # A float mask that needs a gradient (the op gives attn_mask none): the model's eager function.
    fmask = torch.zeros(1, 1, 13, 13).masked_fill(~CAUSAL, float("-inf")).requires_grad_(True)
    ours, _ = hf.attention_forward(m, *leaves, fmask, scaling=0.25, softcap=5.0)
    assert torch_flashattn.stats()["eager"] == 2
    torch.autograd.grad(ours.sum(), [fmask])


@pytest.mark.parametrize("dtype,n,d,ours", [(torch.float32, 64, 64, True), (torch.float32, 13, 16, False),
                                              (torch.bfloat16, 13, 16, True)], ids=["fp32", "fp32-few-keys", "bf16"])
def test_structured_mask_with_gradients_on_the_cpu(dtype, n, d, ours):
    """Training on the CPU with padding (a StructuredMask): our op and its backward (key_mask in the C
    backend) where the drop-in's rule says it beats SDPA's backward, else SDPA with the dense mask;
    the gradients are autograd's through the eager computation either way."""
    torch.manual_seed(9)
    q, k, v = qkv(nq=n, nk=n, d=d)
    key_mask = torch.ones(2, n, dtype=torch.bool)
    key_mask[1, n - n // 4:] = False
    dense = torch.ones(n, n, dtype=torch.bool).tril()[None, None] & key_mask[:, None, None, :]
    mask = hf.StructuredMask(key_mask, True, None, 0, 0, n, n, lambda: dense)
    leaves = [t.to(dtype).requires_grad_(True) for t in (q, k, v)]
    out, _ = hf.attention_forward(module(d=d), *leaves, mask, scaling=0.3)
    assert torch_flashattn.stats()["fa" if ours else "sdpa"] == 1
    d_out = randn(*out.shape)
    got = torch.autograd.grad((out.float() * d_out).sum(), leaves)
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    for name, a, r in zip("qkv", got, eager_grads(None, *(t.detach() for t in leaves), dense, 0.3, d_out)):
        torch.testing.assert_close(a.double(), r, atol=tol * r.abs().max().item(), rtol=tol, msg=f"d{name}")


@pytest.mark.gpu
def test_softcap_and_sinks_train_in_the_cuda_kernel():
    """On CUDA (bf16): softcap and s_aux with a StructuredMask's key_mask, inputs and sinks needing
    gradients: forward and backward in the kernels (the exact path's counter does not move), the
    gradients close to autograd's through the eager computation in float64."""
    from transformers.models.gpt_oss import modeling_gpt_oss
    torch.manual_seed(8)
    q, k, v = qkv(nq=130, nk=130, d=64)
    m = bare_attention(modeling_gpt_oss.GptOssAttention)
    sinks = randn(4)
    key_mask = torch.ones(2, 130, dtype=torch.bool)
    key_mask[1, 100:] = False
    dense = torch.ones(130, 130, dtype=torch.bool).tril()[None, None] & key_mask[:, None, None, :]
    mask = hf.StructuredMask(key_mask.cuda(), True, None, 0, 0, 130, 130, lambda: dense.cuda())
    leaves = [t.cuda().bfloat16().requires_grad_(True) for t in (q, k, v)]
    s_aux = sinks.cuda().bfloat16().requires_grad_(True)
    before = torch_flashattn.stats()["exact"]
    ours, _ = hf.attention_forward(m, *leaves, mask, scaling=0.125, softcap=5.0, s_aux=s_aux)
    d_out = randn(*ours.shape)
    got = torch.autograd.grad((ours.float() * d_out.cuda()).sum(), leaves + [s_aux])
    assert torch_flashattn.stats()["exact"] == before and torch_flashattn.stats()["fa"] == 1
    ref = eager_grads(m, *(t.detach().cpu() for t in leaves), dense, 0.125, d_out, softcap=5.0,
                      sinks=s_aux.detach().cpu())
    for name, a, r in zip(("dq", "dk", "dv", "dsinks"), got, ref):
        err = (a.double().cpu() - r).abs().max().item() / r.abs().max().item()
        assert err < 2e-2, f"{name}: error {err:.2e} of max |grad|"


def test_sinks_run_in_the_op():
    """GPT-OSS's sinks (s_aux, a parameter of the model's dtype): the op's sinks, in inference and
    when the parameter needs a gradient (which the op's backward gives it)."""
    from transformers.models.gpt_oss import modeling_gpt_oss
    torch.manual_seed(5)
    q, k, v = qkv()
    m = bare_attention(modeling_gpt_oss.GptOssAttention)
    m.sinks = torch.nn.Parameter(randn(4))
    ref = eager_reference(m, q, k, v, CAUSAL, 0.25, sinks=m.sinks.detach())
    with torch.no_grad():
        ours, _ = hf.attention_forward(m, q, k, v, None, scaling=0.25, s_aux=m.sinks)
    torch.testing.assert_close(ours.double(), ref, atol=1e-5, rtol=1e-5)
    assert torch_flashattn.stats()["fa"] == 1 and torch_flashattn.stats()["fallback_reasons"] == {}
    ours, _ = hf.attention_forward(m, q, k, v, None, scaling=0.25, s_aux=m.sinks)
    torch.testing.assert_close(ours.detach().double(), ref, atol=1e-5, rtol=1e-5)
    assert torch_flashattn.stats()["fa"] == 2 and torch_flashattn.stats()["fallback_reasons"] == {}
    d_out = randn(*ours.shape)
    (got,) = torch.autograd.grad((ours * d_out).sum(), [m.sinks])
    want = eager_grads(m, q, k, v, CAUSAL, 0.25, d_out, sinks=m.sinks)[3]
    torch.testing.assert_close(got.double(), want, atol=1e-4, rtol=1e-4)
    # Both sink keywords at once: not one dropped for the other; the model's eager function reads them.
    with torch.no_grad():
        hf.attention_forward(m, q, k, v, None, scaling=0.25, s_aux=m.sinks, sinks=m.sinks)
    assert torch_flashattn.stats()["fallback_reasons"]["keyword s_aux, sinks"] == 1


def test_unknown_keyword_goes_to_eager_and_is_named():
    from transformers.models.llama import modeling_llama
    torch.manual_seed(6)
    q, k, v = qkv()
    m = bare_attention(modeling_llama.LlamaAttention)
    ours, _ = hf.attention_forward(m, q, k, v, padding_mask(2, 13, 13), scaling=0.25, new_feature=torch.ones(1))
    torch.testing.assert_close(ours.double(), eager_reference(m, q, k, v, padding_mask(2, 13, 13), 0.25),
                               atol=1e-5, rtol=1e-5)
    assert torch_flashattn.stats()["fallback_reasons"] == {"keyword new_feature (unknown)": 1}
    # A flag the backend does not know is not dropped when it is False either.
    hf.attention_forward(m, q, k, v, padding_mask(2, 13, 13), scaling=0.25, new_flag=False)
    assert torch_flashattn.stats()["fallback_reasons"]["keyword new_flag (unknown)"] == 1


def test_generate_arguments_are_not_attention_inputs():
    """generate's own arguments (GenerationConfig's fields), which a model that passes its keywords on
    whole hands to attention (Kosmos-2's first step: do_sample, max_new_tokens), change nothing: our
    kernel, eager's numbers. Before, they sent the call to eager attention as unknown keywords."""
    from transformers.models.llama import modeling_llama
    hf.register()
    torch.manual_seed(8)
    q, k, v = qkv()
    m = bare_attention(modeling_llama.LlamaAttention)
    ours, _ = hf.attention_forward(m, q, k, v, None, scaling=0.25, do_sample=False, max_new_tokens=3,
                                   temperature=0.7, num_beams=1)
    causal = torch.ones(13, 13, dtype=torch.bool).tril().expand(2, 1, 13, 13)
    torch.testing.assert_close(ours.double(), eager_reference(m, q, k, v, causal, 0.25), atol=1e-5, rtol=1e-5)
    stats = torch_flashattn.stats()
    assert stats["fa"] == 1 and stats["eager"] == 0 and stats["fallback_reasons"] == {}


def test_sparse_indices_mask_unselected_keys():
    """DeepSeek-V3.2-style top-k key indices (B, Nq, topk), folded into the mask as the models' own
    eager/sdpa branch folds them."""
    torch.manual_seed(7)
    q, k, v = qkv(nq=13, nk=13)
    m = module()
    idx = torch.stack([torch.randperm(13)[:5] for _ in range(2 * 13)]).view(2, 13, 5).int()
    mask = torch.ones(2, 1, 13, 13, dtype=torch.bool).tril()
    ours, _ = hf.attention_forward(m, q, k, v, mask, scaling=0.25, indices=idx)
    dropped = torch.ones(2, 13, 13, dtype=torch.bool).scatter(-1, idx.long(), False)[:, None]
    keep = mask & ~dropped
    keep[..., 0] |= ~keep.any(-1)    # a row with nothing selected: compare where the reference is defined
    rows = (mask & ~dropped).any(-1, keepdim=True).expand(-1, 4, -1, -1).transpose(1, 2)
    ref = eager_reference(m, q, k, v, keep, 0.25)
    torch.testing.assert_close(ours.double()[rows.expand_as(ours)], ref[rows.expand_as(ref)], atol=1e-5, rtol=1e-5)
    assert torch_flashattn.stats()["fallback_reasons"] == {"keyword indices": 1}


def test_no_effect_keywords_keep_the_kernel():
    """Varlen metadata, sliding_window (already in the mask) and None-valued features leave the call on
    our kernels."""
    torch.manual_seed(8)
    q, k, v = qkv()
    ours, _ = hf.attention_forward(module(), q, k, v, None, scaling=0.25, sliding_window=4096, softcap=None,
                                   s_aux=None, output_attentions=False, position_ids=torch.arange(13)[None],
                                   use_cache=True)
    ref, _ = sdpa_attention_forward(module(), q, k, v, None, scaling=0.25)
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
    assert torch_flashattn.stats()["fa"] == 1 and torch_flashattn.stats()["fallback_reasons"] == {}


def test_register_names():
    name = hf.register()
    assert name == "torch_fa" and "sdpa" not in name and "flash" not in name
    from transformers import AttentionInterface
    assert AttentionInterface._global_mapping[name] is hf.attention_forward
    assert AttentionInterface._global_mapping[hf.ALIAS] is hf.attention_forward
