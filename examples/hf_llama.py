"""torch_flashattn as a Hugging Face transformers attention backend on a small Llama model built
from a config (random weights, nothing downloaded). Needs `pip install transformers`.

    python3 examples/hf_llama.py                 # CUDA (bf16) if present, else CPU (fp32)
    PYTHONPATH=. python3 examples/hf_llama.py    # from the repository root after an in-place build

Compares prefill logits and greedy generation with attn_implementation="sdpa", then a left-padded batch
of three prompts of different lengths: tokens compared row by row, and the share of attention calls our
kernels served (padded calls reach torch_flashattn.attention with a key_mask: the backend's mask function
hands the padding over instead of a dense mask).
"""
import copy
import sys

import torch

try:
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError:
    sys.exit("examples/hf_llama.py needs transformers: pip install transformers")

import torch_flashattn
import torch_flashattn.hf


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    name = torch_flashattn.hf.register()
    cfg = LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                      num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=2048)
    torch.manual_seed(0)
    sdpa = LlamaForCausalLM(copy.deepcopy(cfg)).to(device=device, dtype=dtype).eval()
    sdpa.set_attn_implementation("sdpa")
    ours = LlamaForCausalLM(copy.deepcopy(cfg)).to(device=device, dtype=dtype).eval()
    ours.load_state_dict(sdpa.state_dict())
    ours.set_attn_implementation(name)

    ids = torch.randint(0, cfg.vocab_size, (1, 256), device=device)
    mask = torch.ones_like(ids)
    with torch.no_grad():
        diff = (ours(ids).logits.float() - sdpa(ids).logits.float()).abs().max().item()
        torch_flashattn.reset_stats()
        kw = dict(attention_mask=mask, max_new_tokens=16, do_sample=False, pad_token_id=0)
        a, b = sdpa.generate(ids, **kw), ours.generate(ids, **kw)
    print(f"Llama {sum(p.numel() for p in ours.parameters()) / 1e6:.0f}M parameters, {device} {dtype}")
    print(f"prefill: max |logits({name}) - logits(sdpa)| = {diff:.3e}")
    print(f"greedy generation, 16 tokens: identical = {torch.equal(a, b)}")
    print(f"attention calls during generation: {torch_flashattn.stats()}")

    # A left-padded batch: prompts of 256, 200 and 57 tokens, padding id 0 on the left.
    lengths = [256, 200, 57]
    batch = torch.zeros(len(lengths), max(lengths), dtype=torch.long, device=device)
    pad_mask = torch.zeros_like(batch)
    for row, n in enumerate(lengths):
        batch[row, -n:] = torch.randint(1, cfg.vocab_size, (n,), device=device)
        pad_mask[row, -n:] = 1
    with torch.no_grad():
        kw = dict(attention_mask=pad_mask, max_new_tokens=16, do_sample=False, pad_token_id=0)
        a = sdpa.generate(batch, **kw)
        torch_flashattn.reset_stats()
        b = ours.generate(batch, **kw)
    s = torch_flashattn.stats()
    calls = s["fa"] + s["sdpa"] + s["eager"]
    same = [torch.equal(a[row], b[row]) for row in range(len(lengths))]
    print(f"padded batch {lengths}, 16 new tokens: identical per row = {same}")
    print(f"our kernels served {s['fa']} of {calls} attention calls ({s['fa'] / calls:.0%}); "
          f"fallbacks {s['fallback_reasons']}")


if __name__ == "__main__":
    main()
