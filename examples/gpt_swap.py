"""A small GPT in plain PyTorch (nanoGPT-sized, random weights, fixed seed) whose attention is
swapped to torch_flashattn without editing the model, via torch_flashattn.patch_sdpa().

    python3 examples/gpt_swap.py                 # CUDA (bf16) if present, else CPU (fp32)
    PYTHONPATH=. python3 examples/gpt_swap.py    # from the repository root after an in-place build

Prints the largest logit difference between the two runs, the speedup, and which path served the
attention calls.
"""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_flashattn


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, N, 3, self.heads, C // self.heads).unbind(2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, N, C))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=50304, ctx=1024, dim=768, heads=12, layers=12):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(ctx, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def timed(fn, device, reps):
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        out = fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return out, (time.perf_counter() - t) / reps


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    if device == "cuda":
        model, batch, seq, reps = GPT(), 8, 1024, 10                    # GPT-2 small
    else:
        model, batch, seq, reps = GPT(vocab=4096, ctx=512, dim=256, heads=4, layers=4), 2, 512, 3
    model = model.to(device=device, dtype=dtype).eval()
    idx = torch.randint(0, model.tok.num_embeddings, (batch, seq), device=device)
    with torch.no_grad():
        ref, t_ref = timed(lambda: model(idx), device, reps)
        torch_flashattn.reset_stats()
        with torch_flashattn.patch_sdpa():
            ours, t_ours = timed(lambda: model(idx), device, reps)
    diff = (ours.float() - ref.float()).abs().max().item()
    scale = ref.float().abs().max().item()
    print(f"GPT: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, {device} {dtype}, "
          f"batch {batch} x {seq} tokens")
    print(f"max |logits(fa) - logits(SDPA)| = {diff:.3e} (max |logit| {scale:.2f})")
    print(f"forward: SDPA {t_ref * 1e3:.1f} ms, fa {t_ours * 1e3:.1f} ms, speedup {t_ref / t_ours:.2f}x")
    print(f"attention calls: {torch_flashattn.stats()}")
    assert math.isfinite(diff)


if __name__ == "__main__":
    main()
