"""Train a small character-level GPT twice from the same seed: once with torch_flashattn.attention
(forward and backward through the fa:: ops), once with F.scaled_dot_product_attention, and compare
the loss curves.

    python3 examples/train_gpt.py                      # CPU, fp32, 300 steps (about 15 s on 2 cores)
    python3 examples/train_gpt.py --steps 100 --device cuda --dtype bf16

The text is this repository's README. Prints both losses every 50 steps, the largest gap between the
curves, and tokens/s for each; writes train_gpt.png of both curves when matplotlib is installed.
"""
import argparse
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_flashattn


class Block(nn.Module):
    def __init__(self, dim, heads, attend):
        super().__init__()
        self.heads, self.attend = heads, attend
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, N, 3, self.heads, C // self.heads).unbind(2)
        y = self.attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))   # (B, H, N, d) views
        x = x + self.proj(y.transpose(1, 2).reshape(B, N, C))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, ctx, dim, heads, layers, attend):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(ctx, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, attend) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def train(attend, data, vocab, args, device, dtype):
    torch.manual_seed(0)
    model = GPT(vocab, args.ctx, args.dim, args.heads, args.layers, attend).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(1)
    losses, tokens, seconds = [], 0, 0.0
    for step in range(args.steps):
        starts = torch.randint(0, len(data) - args.ctx - 1, (args.batch,), generator=gen)
        x = torch.stack([data[s:s + args.ctx] for s in starts]).to(device)
        y = torch.stack([data[s + 1:s + args.ctx + 1] for s in starts]).to(device)
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            loss = F.cross_entropy(model(x).float().view(-1, vocab), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds += time.perf_counter() - t0
        tokens += x.numel()
        losses.append(loss.item())
    return losses, tokens / seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--ctx", type=int, default=64)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp16"])
    args = ap.parse_args()
    device = torch.device(args.device)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]

    text = open(os.path.join(os.path.dirname(__file__), "..", "README.md"), encoding="utf-8").read()
    chars = sorted(set(text))
    data = torch.tensor([chars.index(c) for c in text], dtype=torch.long)

    ours = lambda q, k, v: torch_flashattn.attention(q, k, v, causal=True)            # noqa: E731
    sdpa = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)    # noqa: E731
    loss_fa, tps_fa = train(ours, data, len(chars), args, device, dtype)
    loss_sd, tps_sd = train(sdpa, data, len(chars), args, device, dtype)

    for step in range(0, args.steps, 50):
        print(f"step {step:4d}   torch_flashattn {loss_fa[step]:.4f}   sdpa {loss_sd[step]:.4f}")
    print(f"final loss: torch_flashattn {loss_fa[-1]:.4f}, sdpa {loss_sd[-1]:.4f} (uniform guess {math.log(len(chars)):.2f})")
    print(f"largest gap between the curves: {max(abs(a - b) for a, b in zip(loss_fa, loss_sd)):.2e}")
    print(f"tokens/s (training step, {args.device} {args.dtype}): torch_flashattn {tps_fa:,.0f}, sdpa {tps_sd:,.0f}")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return
    plt.figure(figsize=(6, 3.5))
    plt.plot(loss_fa, label="torch_flashattn")
    plt.plot(loss_sd, label="SDPA", linestyle="--")
    plt.xlabel("step")
    plt.ylabel("training loss")
    plt.legend()
    plt.tight_layout()
    plt.savefig("train_gpt.png", dpi=120)
    print("wrote train_gpt.png")


if __name__ == "__main__":
    main()
