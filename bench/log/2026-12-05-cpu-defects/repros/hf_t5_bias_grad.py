"""transformers backend: T5 where only relative_attention_bias trains (q/k/v need no gradient, the
position_bias does). "sdpa" trains; "torch_fa" raises in fa.forward_variants."""
import torch, transformers as T, torch_flashattn.hf
name = torch_flashattn.hf.register()
cfg = dict(vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
           dropout_rate=0.0, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
ids, dec = torch.randint(4, 128, (2, 24)), torch.randint(4, 128, (2, 10))
for impl in ("sdpa", name):
    torch.manual_seed(0)
    m = T.T5ForConditionalGeneration(T.T5Config(**cfg)).train()
    m.set_attn_implementation(impl)
    for n, p in m.named_parameters():
        p.requires_grad_("relative_attention_bias" in n)
    try:
        m(input_ids=ids, decoder_input_ids=dec).logits.sum().backward()
        print(impl, "ok")
    except RuntimeError as e:
        print(impl, "RAISES:", str(e)[:120])
