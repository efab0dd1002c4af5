# A battery of tiny random Hugging Face transformers models for the torch_flashattn attention backend:
# MODELS (one spec per architecture) and compare(), which runs a model under a reference attention
# implementation and under ours and returns the differences. Used by tests/test_hf_models.py:
#     python3 -m pytest -q -s tests/test_hf_models.py
#
# Every config is built here (no hub access), with tiny sizes and random weights; sliding windows
# are shorter than the sequences so that window masks take effect.
#
# Left out, because its attention does not go through transformers' ALL_ATTENTION_FUNCTIONS (no
# attn_implementation reaches our backend):
#   Falcon: before transformers 5.25, FalconAttention calls F.scaled_dot_product_attention or its own
#   eager code directly (5.25 calls through the interface; the battery does not have it yet).
# LongT5 is in, though only its decoder uses the interface (the encoder's local attention is its own
# einsum code).
import contextlib
import copy
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
import transformers as T

SEQ = 24          # tokens per sequence: longer than every sliding window below
WINDOW = 8
DEC_SEQ = 10      # decoder tokens for encoder-decoder forwards
PAD = 5           # padded positions in the second row of the padded batch
NEW_TOKENS = 6
SEED = 0
# Larger than the usual 0.02 so that attention is far from uniform and errors in it show in the logits.
INIT = 0.2


@dataclass(frozen=True)
class Spec:
    name: str
    config: Callable[[], "T.PreTrainedConfig"]
    model: type
    # "causal": input_ids, left padding; "encoder": input_ids, right padding; "seq2seq": input_ids and
    # decoder_input_ids, the encoder side right padded; "speech": input_features and decoder_input_ids;
    # "image": pixel_values; "text_image": input_ids (right padded) and pixel_values.
    inputs: str
    padding: bool
    generate: bool
    # "sdpa" where the class has _supports_sdpa = True in transformers 5.24, else "eager" (as late as 5.17
    # Gemma2 still claimed SDPA support, though SDPA cannot apply its softcapping).
    ref: str


def _dec(cls, **kw):
    """A Llama-shaped decoder config; kw overrides."""
    base = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=64, initializer_range=INIT, pad_token_id=0,
                bos_token_id=1, eos_token_id=2)
    return lambda: cls(**{**base, **kw})


def _bert(cls, **kw):
    base = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=64, initializer_range=INIT, pad_token_id=0)
    return lambda: cls(**{**base, **kw})


def _t5(cls, **kw):
    # T5's default init (initializer_factor 1, fan-in scaled) already gives peaked attention.
    base = dict(vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                dropout_rate=0.0, relative_attention_num_buckets=8, relative_attention_max_distance=16,
                pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    return lambda: cls(**{**base, **kw})


def _bart(cls, **kw):
    base = dict(vocab_size=128, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64,
                init_std=INIT, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=2,
                forced_eos_token_id=None)
    return lambda: cls(**{**base, **kw})


def _vision(**kw):
    return dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=16,
                patch_size=4, num_channels=3, **kw)


def _text(**kw):
    return dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                max_position_embeddings=SEQ, **kw)


SWA = ["sliding_attention", "full_attention"]   # one windowed layer and one full layer

MODELS = [
    # decoders
    Spec("llama", _dec(T.LlamaConfig), T.LlamaForCausalLM, "causal", True, True, "sdpa"),
    Spec("mistral", _dec(T.MistralConfig, sliding_window=WINDOW), T.MistralForCausalLM, "causal", True, True, "sdpa"),
    Spec("qwen2", _dec(T.Qwen2Config), T.Qwen2ForCausalLM, "causal", True, True, "sdpa"),
    Spec("qwen3", _dec(T.Qwen3Config, head_dim=16), T.Qwen3ForCausalLM, "causal", True, True, "sdpa"),
    Spec("phi3", _dec(T.Phi3Config), T.Phi3ForCausalLM, "causal", True, True, "sdpa"),
    Spec("phi", _dec(T.PhiConfig), T.PhiForCausalLM, "causal", True, True, "sdpa"),
    Spec("gemma", _dec(T.GemmaConfig, head_dim=16), T.GemmaForCausalLM, "causal", True, True, "sdpa"),
    # Gemma2 keeps its default attn_logit_softcapping (50) and final_logit_softcapping (30).
    Spec("gemma2", _dec(T.Gemma2Config, head_dim=16, query_pre_attn_scalar=16, sliding_window=WINDOW,
                        layer_types=SWA), T.Gemma2ForCausalLM, "causal", True, True, "eager"),
    Spec("gemma3", _dec(T.Gemma3TextConfig, head_dim=16, query_pre_attn_scalar=16, sliding_window=WINDOW,
                        layer_types=SWA), T.Gemma3ForCausalLM, "causal", True, True, "sdpa"),
    # GPT-OSS: attention sinks (s_aux), a sliding layer, and a tiny mixture of experts.
    Spec("gpt_oss", _dec(T.GptOssConfig, head_dim=16, intermediate_size=32, num_local_experts=4,
                         num_experts_per_tok=2, sliding_window=WINDOW, layer_types=SWA),
         T.GptOssForCausalLM, "causal", True, True, "eager"),
    Spec("gpt2", lambda: T.GPT2Config(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                                      initializer_range=INIT, bos_token_id=1, eos_token_id=2, pad_token_id=0),
         T.GPT2LMHeadModel, "causal", True, True, "sdpa"),
    Spec("gptj", lambda: T.GPTJConfig(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=64, rotary_dim=8,
                                      initializer_range=INIT, bos_token_id=1, eos_token_id=2, pad_token_id=0),
         T.GPTJForCausalLM, "causal", True, True, "sdpa"),
    Spec("gpt_neox", _dec(T.GPTNeoXConfig), T.GPTNeoXForCausalLM, "causal", True, True, "sdpa"),
    Spec("opt", lambda: T.OPTConfig(vocab_size=128, hidden_size=64, ffn_dim=128, num_hidden_layers=2,
                                    num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=64,
                                    init_std=INIT, pad_token_id=0, bos_token_id=1, eos_token_id=2),
         T.OPTForCausalLM, "causal", True, True, "sdpa"),
    Spec("starcoder2", _dec(T.Starcoder2Config, sliding_window=WINDOW), T.Starcoder2ForCausalLM, "causal", True,
         True, "sdpa"),
    Spec("cohere", _dec(T.CohereConfig), T.CohereForCausalLM, "causal", True, True, "sdpa"),
    Spec("olmo2", _dec(T.Olmo2Config), T.Olmo2ForCausalLM, "causal", True, True, "sdpa"),
    Spec("stablelm", _dec(T.StableLmConfig), T.StableLmForCausalLM, "causal", True, True, "sdpa"),
    # encoders
    Spec("bert", _bert(T.BertConfig), T.BertForMaskedLM, "encoder", True, False, "sdpa"),
    Spec("roberta", _bert(T.RobertaConfig, pad_token_id=1), T.RobertaForMaskedLM, "encoder", True, False, "sdpa"),
    Spec("xlm_roberta", _bert(T.XLMRobertaConfig, pad_token_id=1), T.XLMRobertaForMaskedLM, "encoder", True, False,
         "sdpa"),
    Spec("electra", _bert(T.ElectraConfig, embedding_size=32), T.ElectraForMaskedLM, "encoder", True, False, "sdpa"),
    Spec("albert", _bert(T.AlbertConfig, embedding_size=32), T.AlbertForMaskedLM, "encoder", True, False, "sdpa"),
    Spec("distilbert", lambda: T.DistilBertConfig(vocab_size=128, dim=64, hidden_dim=128, n_layers=2, n_heads=4,
                                                  max_position_embeddings=64, initializer_range=INIT, pad_token_id=0),
         T.DistilBertForMaskedLM, "encoder", True, False, "sdpa"),
    # ModernBERT: local_attention is the whole window (WINDOW // 2 keys either side) on its local layers.
    Spec("modernbert", _bert(T.ModernBertConfig, local_attention=WINDOW, layer_types=["full_attention",
                                                                                      "sliding_attention"],
                             bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2),
         T.ModernBertForMaskedLM, "encoder", True, False, "sdpa"),
    # encoder-decoders
    Spec("t5", _t5(T.T5Config), T.T5ForConditionalGeneration, "seq2seq", True, True, "sdpa"),
    Spec("mt5", _t5(T.MT5Config, feed_forward_proj="gated-gelu"), T.MT5ForConditionalGeneration, "seq2seq", True,
         True, "sdpa"),
    Spec("umt5", _t5(T.UMT5Config, feed_forward_proj="gated-gelu"), T.UMT5ForConditionalGeneration, "seq2seq", True,
         True, "sdpa"),
    Spec("switch_transformers", _t5(T.SwitchTransformersConfig, num_experts=4, expert_capacity=64,
                                    num_sparse_encoder_layers=1, num_sparse_decoder_layers=1,
                                    router_jitter_noise=0.0),
         T.SwitchTransformersForConditionalGeneration, "seq2seq", True, True, "eager"),
    # LongT5's default init is sharper than T5's (near one-hot attention); 0.75 brings it in line.
    Spec("longt5", _t5(T.LongT5Config, local_radius=WINDOW // 2, initializer_factor=0.75),
         T.LongT5ForConditionalGeneration, "seq2seq", True, True, "eager"),
    Spec("bart", _bart(T.BartConfig), T.BartForConditionalGeneration, "seq2seq", True, True, "sdpa"),
    Spec("mbart", _bart(T.MBartConfig), T.MBartForConditionalGeneration, "seq2seq", True, True, "sdpa"),
    Spec("whisper", lambda: T.WhisperConfig(vocab_size=128, num_mel_bins=16, d_model=64, encoder_layers=2,
                                            decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                                            encoder_ffn_dim=128, decoder_ffn_dim=128, max_source_positions=SEQ,
                                            max_target_positions=32, init_std=INIT, pad_token_id=0, bos_token_id=1,
                                            eos_token_id=2, decoder_start_token_id=3, begin_suppress_tokens=None),
         T.WhisperForConditionalGeneration, "speech", False, True, "sdpa"),
    # vision
    Spec("vit", lambda: T.ViTConfig(**_vision(initializer_range=INIT)), T.ViTModel, "image", False, False, "sdpa"),
    Spec("dinov2", lambda: T.Dinov2Config(**_vision(initializer_range=INIT)), T.Dinov2Model, "image", False, False,
         "sdpa"),
    # CLIP scales its attention init by initializer_factor (1 leaves vision attention near uniform).
    Spec("clip", lambda: T.CLIPConfig(text_config=_text(initializer_factor=3.0, pad_token_id=0, bos_token_id=1,
                                                        eos_token_id=2),
                                      vision_config=_vision(initializer_factor=3.0), projection_dim=32),
         T.CLIPModel, "text_image", True, False, "sdpa"),
    Spec("siglip", lambda: T.SiglipConfig(text_config=_text(pad_token_id=0, bos_token_id=1, eos_token_id=2),
                                          vision_config=_vision()),
         T.SiglipModel, "text_image", True, False, "sdpa"),
]


def _inputs(spec, config):
    """Random inputs for a batch of two; token ids avoid the special tokens 0..3."""
    g = torch.Generator().manual_seed(SEED)
    kind = spec.inputs
    text = config.text_config if kind == "text_image" else config
    out = {}
    if kind == "speech":
        out["input_features"] = torch.randn(2, config.num_mel_bins, 2 * config.max_source_positions, generator=g)
    elif kind in ("image", "text_image"):
        vision = config if kind == "image" else config.vision_config
        out["pixel_values"] = torch.randn(2, vision.num_channels, vision.image_size, vision.image_size, generator=g)
    if kind in ("causal", "encoder", "seq2seq", "text_image"):
        out["input_ids"] = torch.randint(4, text.vocab_size, (2, SEQ), generator=g)
    if kind in ("seq2seq", "speech"):
        out["decoder_input_ids"] = torch.randint(4, text.vocab_size, (2, DEC_SEQ), generator=g)
    return out


def _pad(spec, config, inputs):
    """Pads the second row of the token inputs by PAD positions: on the left for decoder-only models,
    on the right otherwise. Returns the inputs with attention_mask, and the mask of valid tokens."""
    ids = inputs["input_ids"].clone()
    mask = torch.ones_like(ids)
    text = config.text_config if spec.inputs == "text_image" else config
    where = slice(0, PAD) if spec.inputs == "causal" else slice(SEQ - PAD, SEQ)
    ids[1, where] = text.pad_token_id
    mask[1, where] = 0
    return {**inputs, "input_ids": ids, "attention_mask": mask}, mask.bool()


def _outputs(spec, out, mask):
    """The output tensors to compare, each restricted to valid positions (mask: batch × tokens of the
    token inputs, None for all positions)."""
    def valid(t):
        return t if mask is None else t[mask]

    kind = spec.inputs
    if kind in ("causal", "encoder"):
        return {"logits": valid(out.logits)}
    if kind in ("seq2seq", "speech"):
        return {"logits": out.logits, "encoder": valid(out.encoder_last_hidden_state)}
    if kind == "image":
        return {"hidden": out.last_hidden_state}
    # text_image: the pooled text embedding (hence logits_per_image) is taken at a position that padding
    # can move, so padded runs compare only the per-token states.
    res = {"text": valid(out.text_model_output.last_hidden_state),
           "vision": out.vision_model_output.last_hidden_state}
    if mask is None:
        res["logits_per_image"] = out.logits_per_image
    return res


def _max_diff(a, b):
    return max((x.double() - y.double()).abs().max().item() for x, y in zip(a.values(), b.values()))


def _build(spec, config, impl, state=None):
    torch.manual_seed(SEED)
    model = spec.model(copy.deepcopy(config))   # configs are shared objects: each model gets its own
    if state is not None:
        model.load_state_dict(state)
    model.set_attn_implementation(impl)
    return model.eval()


def _to(inputs, device, dtype):
    return {k: v.to(device, dtype) if v.is_floating_point() else v.to(device) for k, v in inputs.items()}


def _generate(model, inputs, device, dtype):
    """Greedy tokens (batch, NEW_TOKENS) and the raw logits of each step, on the CPU in fp32."""
    inputs = {k: v for k, v in inputs.items() if k != "decoder_input_ids"}
    if "input_ids" in inputs:
        inputs.setdefault("attention_mask", torch.ones_like(inputs["input_ids"]))
    # min_new_tokens: every run makes NEW_TOKENS steps, also where a random model picks EOS early.
    out = model.generate(**_to(inputs, device, dtype), do_sample=False, max_new_tokens=NEW_TOKENS,
                         min_new_tokens=NEW_TOKENS, output_logits=True, return_dict_in_generate=True,
                         pad_token_id=0)
    return out.sequences[:, -NEW_TOKENS:].cpu(), [x.float().cpu() for x in out.logits]


def _compare_generation(ref, ours):
    (ref_tokens, ref_logits), (our_tokens, our_logits) = ref, ours
    differ = (ref_tokens != our_tokens).any(0).nonzero()
    first = differ[0].item() if len(differ) else None
    res = {"tokens_equal": first is None, "first_diff": first, "margin": 0.0,
           "err": max([(a - b).abs().max().item() for a, b in zip(our_logits[:first], ref_logits[:first])],
                      default=0.0)}
    if first is not None:
        rows, step = torch.arange(ref_tokens.shape[0]), ref_logits[first]
        res["margin"] = (step[rows, ref_tokens[:, first]] - step[rows, our_tokens[:, first]]).max().item()
    return res


@contextlib.contextmanager
def _quiet():
    """Tiny random configs draw deprecation, RoPE and generation-config notices; none matter here."""
    verbosity = T.logging.get_verbosity()
    T.logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        T.logging.set_verbosity(verbosity)


def compare(spec, ours_name, device="cpu", dtype=torch.float32):
    """Runs spec's model under spec.ref and under ours_name (same weights) in dtype on device.

    Returns a dict of the checks the spec supports: "forward", "padded" (valid positions only), each
    {"err": max |ours - reference in fp32|, "ref_err": max |reference in dtype - reference in fp32|}
    (ref_err is 0 in fp32, where the reference is the fp32 model), and "generate", "generate_padded",
    each {"tokens_equal", "first_diff": first step where the greedy tokens differ or None, "margin":
    there, the reference's logit lead of its token over ours, "err": max logit difference to the
    reference in dtype over the steps before}. Asserts nothing; exceptions from the models propagate.
    """
    with _quiet(), torch.no_grad():
        config = spec.config()
        ref = _build(spec, config, spec.ref)
        state = ref.state_dict()
        ours = _build(spec, config, ours_name, state).to(device, dtype)
        ref32 = None if dtype == torch.float32 else _build(spec, config, spec.ref, state).to(device)
        ref = ref.to(device, dtype)

        inputs = _inputs(spec, config)
        runs = [("forward", "generate", inputs, None)]
        if spec.padding:
            runs.append(("padded", "generate_padded", *_pad(spec, config, inputs)))
        results = {}
        for check, gen_check, x, mask in runs:
            mask = None if mask is None else mask.to(device)
            o, r = (_outputs(spec, m(**_to(x, device, dtype)), mask) for m in (ours, ref))
            r32 = r if ref32 is None else _outputs(spec, ref32(**_to(x, device, torch.float32)), mask)
            results[check] = {"err": _max_diff(o, r32), "ref_err": _max_diff(r, r32)}
            if spec.generate:
                results[gen_check] = _compare_generation(*(_generate(m, x, device, dtype) for m in (ref, ours)))
    return results
