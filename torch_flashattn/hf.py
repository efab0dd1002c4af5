"""Hugging Face transformers attention backend.

    import torch_flashattn.hf
    torch_flashattn.hf.register()                          # once, after importing transformers
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="fa_sdpa")
    # or, on a model already built: model.set_attn_implementation("fa_sdpa")

Attention runs through ``torch_flashattn.scaled_dot_product_attention``: the FlashAttention kernel for
unpadded prefill (causal, no mask) and for decoding steps (one query against the cache), and PyTorch's
SDPA for what the kernel does not compute (padding masks, chunked prefill against a cache, dropout in
training). Masks are built as for ``attn_implementation="sdpa"``, which leaves out the mask whenever
the plain causal flag is exact. transformers is an optional dependency (``pip install transformers``).
"""
import torch

from .sdpa import scaled_dot_product_attention

NAME = "fa_sdpa"   # transformers treats names containing "flash" as its own flash-attn kernels


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None,
                      **kwargs):
    """transformers' attention-function protocol: query (B, Hq, L, d), key and value (B, Hkv, S, d);
    returns (attn_output (B, L, Hq, d), None)."""
    if kwargs.get("softcap") is not None:
        raise ValueError(f"attn_implementation={NAME!r} does not support softcap")
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    # The causal flag is top-left aligned; transformers only leaves the mask out (None) when that is
    # exact: a single query token, or as many queries as keys.
    is_causal = query.shape[2] > 1 and attention_mask is None and is_causal
    if attention_mask is not None and attention_mask.dtype != torch.bool:
        attention_mask = attention_mask.to(query.dtype)
    out = scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout,
                                       is_causal=is_causal, scale=scaling,
                                       enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2).contiguous(), None


def register(name=NAME):
    """Registers the backend (and SDPA-style mask construction) under ``name``."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, sdpa_mask)
    return name
