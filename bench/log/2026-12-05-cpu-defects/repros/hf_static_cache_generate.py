# transformers generate(cache_implementation="static") with attn_implementation="torch_fa": fails before
# any compile is involved; the same call with "sdpa" works.
import torch, transformers as T, torch_flashattn.hf as fhf, warnings
warnings.filterwarnings("ignore"); torch.set_num_threads(1)
name = fhf.register()
def cfg():
    return T.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, head_dim=8)
torch.manual_seed(0)
ids = torch.randint(0, 64, (2, 6)); am = torch.ones(2, 6, dtype=torch.long); am[1, :2] = 0
for impl in ("sdpa", name):
    torch.manual_seed(0)
    m = T.LlamaForCausalLM._from_config(cfg(), attn_implementation=impl).eval()
    for cache in ("dynamic", "static"):
        try:
            out = m.generate(ids, attention_mask=am, max_new_tokens=5, do_sample=False, pad_token_id=0,
                             cache_implementation=cache)
            print(f"{impl:9s} {cache:8s} ok   {out[:, -5:].tolist()}")
        except Exception as e:
            print(f"{impl:9s} {cache:8s} {type(e).__name__}: {str(e).splitlines()[0]}")
