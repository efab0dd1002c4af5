"""Arguments SDPA rejects that the drop-in accepts (and counts as served by fa)."""
import torch, torch_flashattn
sdpa = torch_flashattn.sdpa._torch_sdpa
q, k, v = (torch.randn(1, 2, 9, 16) for _ in range(3))
cases = [("scale=tensor([0.3])", (), dict(scale=torch.tensor([0.3]))),
         ("is_causal=1", (), dict(is_causal=1)), ("is_causal=None", (), dict(is_causal=None)),
         ("enable_gqa=None", (), dict(enable_gqa=None)), ("dropout_p=-0.1", (), dict(dropout_p=-0.1)),
         ("dropout_p=nan", (), dict(dropout_p=float("nan"))),
         ("scale, enable_gqa positional", (None, 0.0, False, 0.3, False), {})]
for name, pos, kw in cases:
    def run(f):
        try: f(q, k, v, *pos, **kw); return "ok"
        except Exception as e: return f"{type(e).__name__}"
    print(f"{name:32s} SDPA: {run(sdpa):14s} drop-in: {run(torch_flashattn.scaled_dot_product_attention)}")
# a call that raises is still counted as served by fa
torch_flashattn.reset_stats()
try: torch_flashattn.scaled_dot_product_attention(torch.randn(1, 3, 20, 8), torch.randn(1, 2, 20, 8), torch.randn(1, 2, 20, 8), enable_gqa=True)
except RuntimeError as e: print("raised:", str(e)[:70])
print(torch_flashattn.stats())
