"""The transformers backend's structured mask (torch_flashattn.hf.structured_mask): which of
transformers' mask patterns it recognises, and that the op given its StructuredMask (key_mask, window,
alignment, keys cut at the last query's diagonal) computes what SDPA computes with the dense mask
transformers' sdpa mask function builds for the same arguments: padding left and right, sliding
windows, bidirectional windows, a prefill chunk against a cache, a static cache longer than the
tokens seen, cross-attention shapes. CPU here; the model battery (test_hf_models.py) runs it on CUDA.
"""
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

mu = pytest.importorskip("transformers.masking_utils")

import torch_flashattn  # noqa: E402
import torch_flashattn.hf  # noqa: E402
from torch_flashattn.hf import StructuredMask, _structure, structured_mask  # noqa: E402


def test_patterns_recognised():
    assert _structure(mu.causal_mask_function) == (True, None, 0)
    assert _structure(mu.bidirectional_mask_function) == (False, None, None)
    assert _structure(mu.sliding_window_causal_mask_function(5)) == (True, 4, 0)
    assert _structure(mu.sliding_window_bidirectional_mask_function(3)) == (False, 3, 3)
    assert _structure(mu.and_masks(mu.sliding_window_overlay(8), mu.sliding_window_overlay(4),
                                   mu.causal_mask_function)) == (True, 3, 0)
    # Patterns it does not express: the dense mask.
    assert _structure(mu.chunked_causal_mask_function(4, torch.zeros(2, dtype=torch.long))) is None
    assert _structure(mu.or_masks(mu.causal_mask_function, mu.bidirectional_mask_function)) is None
    assert _structure(mu.and_masks(mu.causal_mask_function, mu.padding_mask_function(torch.ones(1, 4, dtype=bool)))) is None
    assert _structure(lambda b, h, q, kv: kv <= q) is None
    # Windows that hide every key (kv > q − 0; |q − kv| <= −1) are no window side (once unbounded).
    assert _structure(mu.sliding_window_causal_mask_function(0)) is None
    assert _structure(mu.sliding_window_bidirectional_mask_function(-1)) is None
    assert _structure(mu.sliding_window_bidirectional_mask_function(0)) == (False, 0, 0)


def padding(B, n, left, g):
    """(B, n) bool: row b has 3·b padded positions, at the start (left) or the end."""
    m = torch.ones(B, n, dtype=torch.bool)
    for b in range(B):
        p = min(3 * b, n - 1)
        if p:
            if left:
                m[b, :p] = False
            else:
                m[b, n - p:] = False
    return m


# (name, mask_function, q_length, kv_length, q_offset, kv_offset, padded length or None, left padding)
CASES = [
    ("causal prefill, left padded", mu.causal_mask_function, 12, 12, 0, 0, 12, True),
    ("causal decode step, left padded", mu.causal_mask_function, 1, 13, 12, 0, 13, True),
    ("causal chunk against a cache", mu.causal_mask_function, 5, 17, 12, 0, None, False),
    ("causal chunk, padded", mu.causal_mask_function, 5, 17, 12, 0, 17, True),
    ("static cache longer than the tokens seen", mu.causal_mask_function, 3, 32, 10, 0, 13, True),
    ("sliding window prefill", mu.sliding_window_causal_mask_function(4), 12, 12, 0, 0, None, False),
    ("sliding window decode, padded", mu.sliding_window_causal_mask_function(4), 1, 13, 12, 0, 13, True),
    ("sliding window cache with offset", mu.sliding_window_causal_mask_function(6), 2, 8, 14, 8, 16, True),
    ("bidirectional, right padded", mu.bidirectional_mask_function, 10, 10, 0, 0, 10, False),
    ("bidirectional window", mu.sliding_window_bidirectional_mask_function(2), 10, 10, 0, 0, 10, False),
    ("cross attention, padded encoder", mu.bidirectional_mask_function, 4, 9, 0, 0, 9, False),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_structured_mask_matches_dense(case):
    name, fn, nq, nk, q_off, kv_off, padded, left = case
    g = torch.Generator().manual_seed(len(name))
    B, H, d = 3, 2, 16
    attention_mask = padding(B, padded, left, g) if padded else None
    kw = dict(batch_size=B, q_length=nq, kv_length=nk, q_offset=q_off, kv_offset=kv_off, mask_function=fn,
              attention_mask=attention_mask)
    if "sliding" in name:                       # as create_sliding_window_causal_mask passes it
        kw["local_size"] = {4: 4, 6: 6}[_structure(fn)[1] + 1]
    m = structured_mask(**kw)
    dense = mu.sdpa_mask(**kw)
    q = torch.randn(B, H, nq, d, generator=g)
    k, v = torch.randn(B, H, nk, d, generator=g), torch.randn(B, H, nk, d, generator=g)
    if dense is None:        # the plain causal flag is exact: the mask function says so too
        assert m is None, name
        return
    assert isinstance(m, StructuredMask), name
    assert torch.equal(m.dense(), dense), name
    op = m.op_arguments(k, v)
    assert op is not None, name
    kk, vv, args = op
    out = torch_flashattn.attention(q, kk, vv, **args)
    full = dense.expand(B, H, nq, nk)
    with sdpa_kernel(SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=full)
    seen = full.any(-1)
    torch.testing.assert_close(out[seen], ref[seen].float(), atol=2e-6, rtol=0, msg=name)
    assert (out[~seen] == 0).all(), f"{name}: a query that sees no key is not 0"


def test_offsets_as_tensors_get_the_dense_mask():
    """Static caches may pass a tensor q_offset: reading it would need the host, so the dense mask."""
    kw = dict(batch_size=1, q_length=1, kv_length=8, q_offset=torch.tensor(5), kv_offset=0,
              mask_function=mu.causal_mask_function, attention_mask=torch.ones(1, 8, dtype=torch.bool),
              allow_is_causal_skip=False)
    assert isinstance(structured_mask(**kw), torch.Tensor)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_structured_mask_with_position_bias(case):
    """A relative position bias (T5) beside a StructuredMask: attention_forward gives it to the op as
    its attn_mask, cut to the keys the op keeps (causal calls drop the keys past the last query's
    diagonal), and computes what transformers' sdpa attention does with the dense mask and the bias."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    import torch_flashattn.hf as hf
    name, fn, nq, nk, q_off, kv_off, padded, left = case
    g = torch.Generator().manual_seed(len(name) + 1)
    B, H, d = 3, 2, 16
    attention_mask = padding(B, padded, left, g) if padded else None
    kw = dict(batch_size=B, q_length=nq, kv_length=nk, q_offset=q_off, kv_offset=kv_off, mask_function=fn,
              attention_mask=attention_mask)
    if "sliding" in name:
        kw["local_size"] = {4: 4, 6: 6}[_structure(fn)[1] + 1]
    m = structured_mask(**kw)
    if m is None:
        return
    q = torch.randn(B, H, nq, d, generator=g)
    k, v = torch.randn(B, H, nk, d, generator=g), torch.randn(B, H, nk, d, generator=g)
    bias = torch.randn(1, H, nq, nk, generator=g)
    module = type("M", (), dict(is_causal=True, training=False, num_key_value_groups=1))()
    torch_flashattn.reset_stats()
    ours, _ = hf.attention_forward(module, q, k, v, m, scaling=1.0, position_bias=bias)
    assert torch_flashattn.stats()["fa"] == 1, name
    ref, _ = sdpa_attention_forward(module, q.double(), k.double(), v.double(), mu.sdpa_mask(**kw), scaling=1.0,
                                    position_bias=bias.double())
    seen = m.dense().expand(B, H, nq, nk).any(-1).transpose(1, 2)
    torch.testing.assert_close(ours[seen], ref[seen].float(), atol=2e-5, rtol=0, msg=name)


@pytest.mark.parametrize("amx", [False, True])
def test_bf16_on_an_amx_cpu(monkeypatch, amx):
    """On a CPU with AMX-BF16 (taken as present or absent here), a bf16 StructuredMask call without
    gradients goes to SDPA's AMX kernel with the dense mask, as the drop-in's rule says, but for a
    decoding step and a softcap (which SDPA cannot compute); fp32 stays on the op. Each result is
    transformers' sdpa attention's with the dense mask."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    import torch_flashattn.hf as hf
    monkeypatch.setattr(torch_flashattn.sdpa, "_cpu_amx_bf16", lambda: amx)
    module = type("M", (), dict(is_causal=True, training=False, num_key_value_groups=1))()
    B, H, d = 3, 2, 16
    g = torch.Generator().manual_seed(9)
    for nq, nk, dtype, softcap, path in ((12, 12, torch.bfloat16, None, "sdpa"), (1, 13, torch.bfloat16, None, "fa"),
                                         (12, 12, torch.bfloat16, 20.0, "fa"), (12, 12, torch.float32, None, "fa")):
        kw = dict(batch_size=B, q_length=nq, kv_length=nk, q_offset=nk - nq, kv_offset=0,
                  mask_function=mu.causal_mask_function, attention_mask=padding(B, nk, True, g))
        m = structured_mask(**kw)
        assert isinstance(m, StructuredMask)
        q = torch.randn(B, H, nq, d, generator=g).to(dtype)
        k, v = (torch.randn(B, H, nk, d, generator=g).to(dtype) for _ in range(2))
        torch_flashattn.reset_stats()
        ours, _ = hf.attention_forward(module, q, k, v, m, scaling=0.5, **({"softcap": softcap} if softcap else {}))
        want = path if amx else "fa"
        assert torch_flashattn.stats()[want] == 1 and torch_flashattn.stats()["sdpa"] == (want == "sdpa"), \
            (nq, dtype, softcap, torch_flashattn.stats())
        dense = mu.sdpa_mask(**kw, allow_is_causal_skip=False)
        if softcap:
            s = (q.double() @ k.double().transpose(-1, -2)) * 0.5
            s = (softcap * torch.tanh(s / softcap)).masked_fill(~dense, float("-inf"))
            ref = (s.softmax(-1) @ v.double()).transpose(1, 2)
        else:
            ref, _ = sdpa_attention_forward(module, q.double(), k.double(), v.double(), dense, scaling=0.5)
        seen = dense.expand(B, H, nq, nk).any(-1).transpose(1, 2)
        torch.testing.assert_close(ours[seen].double(), ref[seen], atol=2e-2 if dtype == torch.bfloat16 else 2e-5,
                                   rtol=0, msg=f"{nq} {dtype} {softcap}")


@pytest.mark.parametrize("nq,nk,q_off", [(7, 7, 0), (1, 9, 8), (3, 11, 8)], ids=["prefill", "decoding step", "chunk"])
def test_padding_mask_is_not_read_on_the_host(monkeypatch, nq, nk, q_off):
    """A padding mask, all ones or not, goes to the kernels as key_mask: the mask function reads no
    tensor on the host (transformers' fast_all, .item(), bool()). With all ones the result is the plain
    causal attention's."""
    def no_read(*args, **kwargs):
        raise AssertionError("the mask function read a tensor on the host")
    B, H, d = 2, 2, 16
    g = torch.Generator().manual_seed(nq + nk)
    q = torch.randn(B, H, nq, d, generator=g)
    k, v = torch.randn(B, H, nk, d, generator=g), torch.randn(B, H, nk, d, generator=g)
    for ones in (True, False):
        attention_mask = torch.ones(B, nk, dtype=torch.bool)
        if not ones:
            attention_mask[1, :2] = False
        kw = dict(batch_size=B, q_length=nq, kv_length=nk, q_offset=q_off, kv_offset=0,
                  mask_function=mu.causal_mask_function, attention_mask=attention_mask)
        with monkeypatch.context() as mp:
            mp.setattr(mu, "fast_all", no_read)
            mp.setattr(torch.Tensor, "item", no_read)
            mp.setattr(torch.Tensor, "__bool__", no_read)
            m = structured_mask(**kw)
        assert isinstance(m, StructuredMask) and m.key_mask is not None
        kk, vv, args = m.op_arguments(k, v)
        out = torch_flashattn.attention(q, kk, vv, **args)
        with sdpa_kernel(SDPBackend.MATH):
            ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                 attn_mask=mu.sdpa_mask(**kw, allow_is_causal_skip=False))
        torch.testing.assert_close(out, ref.float(), atol=2e-6, rtol=0)


@pytest.mark.parametrize("arch", ["llama", "mistral"])
def test_static_cache_generate_padded(arch):
    """generate() with a static cache builds the mask before the model runs and passes it in as the
    model's attention_mask; the model's own mask creation hands it back to structured_mask, which
    returns it (a StructuredMask there once raised AttributeError). Tokens and logits as SDPA's."""
    import transformers

    name = torch_flashattn.hf.register()
    cfg = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2)
    config = (transformers.MistralConfig(sliding_window=5, **cfg) if arch == "mistral"
              else transformers.LlamaConfig(**cfg))
    ids = torch.randint(1, 128, (2, 8), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0                                                      # left padding
    outs = {}
    for impl in ("sdpa", name):
        torch.manual_seed(1)
        model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=impl).eval()
        outs[impl] = model.generate(ids, attention_mask=mask, max_new_tokens=4, do_sample=False,
                                    cache_implementation="static", output_logits=True,
                                    return_dict_in_generate=True)
    assert torch.equal(outs["sdpa"].sequences, outs[name].sequences)
    for a, b in zip(outs["sdpa"].logits, outs[name].logits):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)


def test_mask_passed_back_must_match():
    """A StructuredMask handed back to structured_mask is returned only for the sizes and pattern it
    was built for; any other call raises rather than attend under the wrong mask."""
    pad = torch.ones(2, 8, dtype=torch.bool)
    m = structured_mask(2, 4, 8, 4, 0, mu.causal_mask_function, pad)
    assert structured_mask(2, 4, 8, 4, 0, mu.causal_mask_function, m) is m
    for kw in (dict(mask_function=mu.sliding_window_causal_mask_function(3)), dict(q_length=3, q_offset=5)):
        args = dict(batch_size=2, q_length=4, kv_length=8, q_offset=4, kv_offset=0,
                    mask_function=mu.causal_mask_function, attention_mask=m) | kw
        with pytest.raises(RuntimeError, match="was passed back for"):
            structured_mask(**args)


@pytest.mark.parametrize("shapes", ["value head dim of its own", "one query set, two key sets"])
def test_structured_mask_shapes_the_op_does_not_take(shapes):
    """A padded causal StructuredMask with shapes the op refuses reaches SDPA with the dense mask, as
    transformers' own sdpa backend computes it: DeepSeek's MLA (value head dim 16 against 24), and a
    batch of one query set against two key sets, which SDPA broadcasts."""
    g = torch.Generator().manual_seed(7)
    B, H, n = 2, 2, 9
    kw = dict(batch_size=B, q_length=n, kv_length=n, q_offset=0, kv_offset=0,
              mask_function=mu.causal_mask_function, attention_mask=padding(B, n, True, g))
    m = structured_mask(**kw)
    assert isinstance(m, StructuredMask)
    dq, dv, bq = (24, 16, B) if shapes.startswith("value") else (16, 16, 1)
    q = torch.randn(bq, H, n, dq, generator=g)
    k, v = torch.randn(B, H, n, dq, generator=g), torch.randn(B, H, n, dv, generator=g)
    module = torch.nn.Module()
    module.is_causal = True
    ours, _ = torch_flashattn.hf.attention_forward(module, q, k, v, m, scaling=0.3)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mu.sdpa_mask(**kw), scale=0.3).transpose(1, 2)
    torch.testing.assert_close(ours, ref)


def _model_cases():
    import transformers as T
    ids = torch.randint(4, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    pad = torch.ones_like(ids)
    pad[1, :5] = 0
    dec = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4)
    return {
        # asks for the built causal mask to add ALiBi to it (AttributeError on a StructuredMask before)
        "falcon_alibi": ("sdpa", lambda: T.FalconForCausalLM(T.FalconConfig(
            **dec, alibi=True, multi_query=False, parallel_attn=False, bias=True)), dict(input_ids=ids)),
        # asks for the built causal mask for its dynamic mask (the same AttributeError)
        "doge": ("sdpa", lambda: T.DogeForCausalLM(T.DogeConfig(**dec, intermediate_size=128, num_key_value_heads=2)),
                 dict(input_ids=ids, attention_mask=pad)),
        # adds its relative position bias to the bidirectional mask, which "sdpa" gets as None (TypeError)
        "beit": ("sdpa", lambda: T.BeitModel(T.BeitConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=16,
            patch_size=4, use_relative_position_bias=True)), dict(pixel_values=torch.randn(2, 3, 16, 16))),
        # eager only: the decoder's self-attention keeps is_causal False (its logits were 4 off)
        "nllb_moe": ("eager", lambda: T.NllbMoeForConditionalGeneration(T.NllbMoeConfig(
            vocab_size=128, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64,
            num_experts=4, init_std=0.2)), dict(input_ids=ids, decoder_input_ids=ids[:, :8])),
        # eager only, its text attention its own code adding the mask to its scores (6 off)
        "git": ("eager", lambda: T.GitForCausalLM(T.GitConfig(
            **dec, intermediate_size=128, initializer_range=0.2, vision_config=dict(
                hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=16,
                patch_size=4))), dict(input_ids=ids, attention_mask=pad)),
    }


def _model_case(arch):
    """(our backend's name, the reference implementation, the model, its inputs) for _model_cases'
    arch, skipping where this transformers release lacks the class."""
    import transformers
    transformers.logging.set_verbosity_error()
    name = torch_flashattn.hf.register()
    try:
        ref_impl, build, inputs = _model_cases()[arch]
    except AttributeError as e:
        pytest.skip(str(e))
    torch.manual_seed(0)
    return name, ref_impl, build().eval(), inputs


@pytest.mark.parametrize("arch", ["falcon_alibi", "doge", "beit", "nllb_moe", "git"])
def test_models_that_need_the_built_mask(arch):
    """Models whose own code reads the mask the backend's mask function builds: they get what their
    reference implementation gets (sdpa_mask's tensor where they ask for the mask itself, None for an
    unpadded bidirectional mask, eager's additive mask for a model that knows only eager attention),
    and compute its logits."""
    name, ref_impl, model, inputs = _model_case(arch)
    outs = {}
    for impl in (ref_impl, name):
        model.set_attn_implementation(impl)
        with torch.no_grad():
            out = model(**inputs)
        outs[impl] = out.logits if getattr(out, "logits", None) is not None else out.last_hidden_state
    torch.testing.assert_close(outs[name], outs[ref_impl], atol=5e-5, rtol=0)


@pytest.mark.parametrize("arch", ["doge", "git"])
def test_mask_rules_compile_in_one_graph(arch):
    """torch.compile(fullgraph=True) of a model whose mask the backend hands over built (Doge) or takes
    from eager's rule (GIT, an eager-only class), before anything is cached: one graph (MODEL_MAPPING's
    lazy imports and a tensor's is_inference() broke it at the first compile) and the reference's
    logits."""
    name, ref_impl, model, inputs = _model_case(arch)
    model.set_attn_implementation(ref_impl)
    with torch.no_grad():
        ref = model(**inputs).logits
    model.set_attn_implementation(name)
    torch_flashattn.hf._eager_only_cache.clear()
    torch._dynamo.reset()
    with torch.no_grad():
        out = torch.compile(model, fullgraph=True, backend="eager")(**inputs).logits
    torch.testing.assert_close(out, ref, atol=5e-5, rtol=0)


def test_mask_sized_for_other_keys_takes_the_dense_path():
    """MiniMax sizes its decoding step's mask from its first layer, a linear-attention one (one key),
    and SDPA broadcasts that mask over the full-attention layer's keys. The StructuredMask does not
    describe those keys, so the dense mask goes to SDPA as in "sdpa" (it cut the keys to one before:
    the unpadded row's tokens differed from the second step)."""
    import transformers as T
    T.logging.set_verbosity_error()
    if not hasattr(T, "MiniMaxConfig"):
        pytest.skip("no MiniMax in this transformers release")
    name = torch_flashattn.hf.register()
    cfg = T.MiniMaxConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=4,
                          num_experts_per_tok=2, block_size=4, layer_types=["linear_attention", "full_attention"],
                          initializer_range=0.2, pad_token_id=0)
    torch.manual_seed(0)
    model = T.MiniMaxForCausalLM(cfg).eval()
    ids = torch.randint(4, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    ids[1, :5], mask[1, :5] = 0, 0
    outs = {}
    for impl in ("sdpa", name):
        model.set_attn_implementation(impl)
        with torch.no_grad():
            outs[impl] = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=4,
                                        min_new_tokens=4, output_logits=True, return_dict_in_generate=True,
                                        pad_token_id=0)
    assert torch.equal(outs[name].sequences, outs["sdpa"].sequences)
    for a, b in zip(outs[name].logits, outs["sdpa"].logits):
        torch.testing.assert_close(a, b, atol=5e-5, rtol=0)


def test_built_mask_handed_back_untouched_runs_structured():
    """A causal mask asked for itself (allow_is_causal_skip=False: Falcon) is sdpa_mask's tensor; handed
    to the attention function unchanged it runs as the StructuredMask it was built from (our kernels);
    changed in place (its version counter moves) it runs as the dense mask it now is."""
    g = torch.Generator().manual_seed(5)
    B, H, n, d = 2, 2, 9, 16
    kw = dict(batch_size=B, q_length=n, kv_length=n, q_offset=0, kv_offset=0,
              mask_function=mu.causal_mask_function, attention_mask=padding(B, n, True, g))
    built = structured_mask(**kw, allow_is_causal_skip=False)
    assert isinstance(built, torch.Tensor) and torch.equal(built, mu.sdpa_mask(**kw, allow_is_causal_skip=False))
    q, k, v = (torch.randn(B, H, n, d, generator=g) for _ in range(3))
    module = torch.nn.Module()
    module.is_causal = True
    for touched in (False, True):
        if touched:
            built[0, 0, 4, 2] = False                     # in place: the tensor no longer says what it was built from
        torch_flashattn.reset_stats()
        ours, _ = torch_flashattn.hf.attention_forward(module, q, k, v, built, scaling=0.25)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=built, scale=0.25).transpose(1, 2)
        seen = built.expand(B, H, n, n).any(-1).transpose(1, 2)
        torch.testing.assert_close(ours[seen], ref[seen], atol=2e-6, rtol=0)
        assert torch_flashattn.stats()["fa" if not touched else "sdpa"] == 1, torch_flashattn.stats()
