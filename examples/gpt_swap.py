"""A small GPT in plain PyTorch (nanoGPT-sized, random weights, fixed seed) whose attention is
swapped to torch_flashattn without editing the model, via torch_flashattn.patch_sdpa().

    python3 examples/gpt_swap.py                 # CUDA (bf16) if present, else CPU (fp32)
    PYTHONPATH=. python3 examples/gpt_swap.py    # from the repository root after an in-place build

Prints the largest logit difference between the two runs, the speedup, and which path served the
attention calls; then generates tokens greedily with a KV cache both ways (each step one query against
the cache, which runs the split-KV decode kernel) and prints whether the tokens agree and the speed.
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

    def forward(self, x, cache=None, pos=0):
        """cache: this block's (k, v) buffers (B, heads, ctx, head dim), filled at pos .. pos + N."""
        B, N, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, N, 3, self.heads, C // self.heads).transpose(1, 3).unbind(2)
        if cache is not None:
            cache[0][:, :, pos:pos + N], cache[1][:, :, pos:pos + N] = k, v
            k, v = cache[0][:, :, :pos + N], cache[1][:, :, :pos + N]
        # The prompt is causal; a decoding step's one query sees every cached key.
        y = F.scaled_dot_product_attention(q, k, v, is_causal=pos == 0)
        x = x + self.proj(y.transpose(1, 2).reshape(B, N, C))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=50304, ctx=1024, dim=768, heads=12, layers=12):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(ctx, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, idx, caches=None, pos=0):
        x = self.tok(idx) + self.pos(torch.arange(pos, pos + idx.shape[1], device=idx.device))
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches is not None else None, pos)
        return self.head(self.ln(x))

    @torch.no_grad()
    def generate(self, idx, new_tokens):
        """Greedy decoding with a preallocated KV cache: one forward over the prompt, then one per token."""
        B, N = idx.shape
        p = self.tok.weight
        shape = (B, self.blocks[0].heads, N + new_tokens, p.shape[1] // self.blocks[0].heads)
        caches = [(p.new_empty(shape), p.new_empty(shape)) for _ in self.blocks]
        tok = self(idx, caches)[:, -1:].argmax(-1)
        out = [tok]
        for i in range(new_tokens - 1):
            tok = self(tok, caches, N + i)[:, -1:].argmax(-1)
            out.append(tok)
        return torch.cat(out, dim=1)


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

    prompt, new = idx[:, :seq // 2], 64 if device == "cuda" else 16
    ref_tokens, t_ref = timed(lambda: model.generate(prompt, new), device, 2)
    torch_flashattn.reset_stats()
    with torch_flashattn.patch_sdpa():
        our_tokens, t_ours = timed(lambda: model.generate(prompt, new), device, 2)
    same = (our_tokens == ref_tokens).float().mean().item()
    print(f"greedy generation, {batch} x {new} tokens after a {prompt.shape[1]}-token prompt: "
          f"{100 * same:.1f}% of tokens identical")
    print(f"generation: SDPA {batch * new / t_ref:.0f} tokens/s, fa {batch * new / t_ours:.0f} tokens/s, "
          f"speedup {t_ref / t_ours:.2f}x")
    print(f"attention calls: {torch_flashattn.stats()}")


if __name__ == "__main__":
    main()
