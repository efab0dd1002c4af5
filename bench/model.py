# Model-level inference benchmark: a Llama-3.2-1B-shaped decoder in plain PyTorch (no transformers),
# random weights, timed end to end with its attention served by our op, by each named SDPA backend and
# by an eager matmul-softmax-matmul. What a user gains in a real model, where attention is one part of
# the time next to the linear layers.
#
#   python3 -m bench.model                             # the full set on CUDA -> bench/out/model.*
#   python3 -m bench.model --out bench/results         # the committed bench/results/model.*
#   python3 -m bench.model --quick                     # smoke run on CUDA (a minute)
#   python3 -m bench.model --device cpu --quick        # tiny config, fp32, seconds on 2 CPU cores
#
# 1. Prefill: one forward over B × N prompt tokens (logits of the last token only, as generation
#    needs), ms and tokens/s per attention provider, N in 1k..16k, B in 1..8, B·N <= --max-tokens.
#    The provider "none" skips attention (returns q), so fa's time minus its time is attention's share.
# 2. Greedy decode: prefill the prompt into a static preallocated KV cache, then time --new-tokens
#    single-token steps. Ours runs fa::forward_kvcache when it runs on the device (probed at start),
#    otherwise fa::forward on the cache's valid prefix; the SDPA backends and eager attend the prefix.
# Before any timing, every provider's logits on a short prompt (prefill and teacher-forced decode
# steps) are compared with attention computed in float64; ours must be within 2 × SDPA's error.
# README section: python3 -m bench.readme_table bench/results/model.json
import argparse
import contextlib
import json
import math
import shlex
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_flashattn
from bench import model_report
from bench.attention import check_providers, environment, git_commit, parse_n, parsed, probe


# ---------------------------------------------------------------------------------------------
# The model.

@dataclass(frozen=True)
class Config:
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    rope_theta: float = 500000.0
    norm_eps: float = 1e-5


CONFIGS = {
    # Llama-3.2-1B's shapes (tied embeddings, 1.24B parameters): head dim 64, GQA 32/8.
    "llama-1b": Config(vocab=128256, hidden=2048, layers=16, heads=32, kv_heads=8, head_dim=64,
                       intermediate=8192),
    # For CPU smoke runs: the same structure, 2.6M parameters.
    "tiny": Config(vocab=4096, hidden=256, layers=2, heads=8, kv_heads=2, head_dim=32, intermediate=768),
}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps, **factory):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, **factory))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def rotate(x, cos, sin):
    """Rotary embedding, rotate-half form: x (B, H, N, d), cos/sin (N, d)."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class KVCache:
    """Static per-layer caches, (B, Hkv, Nmax, d) each, and the int32 valid length per sequence."""

    def __init__(self, cfg, batch, n_max, **factory):
        shape = (batch, cfg.kv_heads, n_max, cfg.head_dim)
        self.k = [torch.zeros(shape, **factory) for _ in range(cfg.layers)]
        self.v = [torch.zeros(shape, **factory) for _ in range(cfg.layers)]
        self.seqlens = torch.zeros(batch, dtype=torch.int32, device=factory.get("device"))


class Attention(nn.Module):
    def __init__(self, cfg, **factory):
        super().__init__()
        self.cfg = cfg
        q_dim, kv_dim = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden, q_dim, bias=False, **factory)
        self.k_proj = nn.Linear(cfg.hidden, kv_dim, bias=False, **factory)
        self.v_proj = nn.Linear(cfg.hidden, kv_dim, bias=False, **factory)
        self.o_proj = nn.Linear(q_dim, cfg.hidden, bias=False, **factory)

    def forward(self, x, cos, sin, model, layer, cache, pos):
        B, N, _ = x.shape
        c = self.cfg
        q = self.q_proj(x).view(B, N, c.heads, c.head_dim).transpose(1, 2)        # (B, Hq, N, d)
        k = self.k_proj(x).view(B, N, c.kv_heads, c.head_dim).transpose(1, 2)     # (B, Hkv, N, d)
        v = self.v_proj(x).view(B, N, c.kv_heads, c.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if cache is None:                                   # prefill without a cache
            y = model.attn_fn(q, k, v, is_causal=True, enable_gqa=True)
        elif pos == 0:                                      # prefill into the cache: Nq = Nk, top-left causal
            cache.k[layer][:, :, :N] = k
            cache.v[layer][:, :, :N] = v
            y = model.attn_fn(q, k, v, is_causal=True, enable_gqa=True)
        elif model.use_kvcache_op:                          # decode: append and attend in one op
            y = torch.ops.fa.forward_kvcache(q, cache.k[layer], cache.v[layer], cache.seqlens, k, v)
        else:                                               # decode: append, attend the valid prefix
            cache.k[layer][:, :, pos:pos + N] = k
            cache.v[layer][:, :, pos:pos + N] = v
            kc, vc = cache.k[layer][:, :, :pos + N], cache.v[layer][:, :, :pos + N]
            y = model.attn_fn(q, kc, vc, is_causal=False, enable_gqa=True)   # N = 1: sees every key
        return self.o_proj(y.transpose(1, 2).reshape(B, N, c.heads * c.head_dim))


class MLP(nn.Module):
    def __init__(self, cfg, **factory):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False, **factory)
        self.up_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False, **factory)
        self.down_proj = nn.Linear(cfg.intermediate, cfg.hidden, bias=False, **factory)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))     # SwiGLU


class Block(nn.Module):
    def __init__(self, cfg, **factory):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.hidden, cfg.norm_eps, **factory)
        self.attn = Attention(cfg, **factory)
        self.mlp_norm = RMSNorm(cfg.hidden, cfg.norm_eps, **factory)
        self.mlp = MLP(cfg, **factory)

    def forward(self, x, cos, sin, model, layer, cache, pos):
        x = x + self.attn(self.attn_norm(x), cos, sin, model, layer, cache, pos)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nn.Module):
    """Llama-style decoder. `attn_fn` has F.scaled_dot_product_attention's signature and is the one
    place attention happens; `use_kvcache_op` routes decode steps to fa::forward_kvcache."""

    def __init__(self, cfg, max_pos, device, dtype):
        super().__init__()
        factory = dict(device=device, dtype=dtype)
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.hidden, **factory)
        self.blocks = nn.ModuleList(Block(cfg, **factory) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden, cfg.norm_eps, **factory)
        inv_freq = 1.0 / cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, device=device) / cfg.head_dim)
        angles = torch.outer(torch.arange(max_pos, device=device, dtype=torch.float32), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)                              # (max_pos, d)
        self.register_buffer("cos", angles.cos().to(dtype), persistent=False)
        self.register_buffer("sin", angles.sin().to(dtype), persistent=False)
        self.attn_fn = F.scaled_dot_product_attention
        self.use_kvcache_op = False

    def forward(self, ids, cache=None, pos=0, all_logits=False):
        """ids (B, N) -> logits (B, vocab) of the last token, or (B, N, vocab) with all_logits.
        With a cache: pos = 0 prefills it, pos > 0 is a decode step (N = 1) at position pos."""
        N = ids.shape[1]
        assert pos == 0 or N == 1, "the cache takes a prefill from 0 or single-token steps"
        cos, sin = self.cos[pos:pos + N], self.sin[pos:pos + N]
        if cache is not None and pos > 0:
            cache.seqlens.fill_(pos)                        # valid keys before this step's append
        x = self.embed(ids)
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, self, i, cache, pos)
        x = x if all_logits else x[:, -1]
        return self.norm(x) @ self.embed.weight.t()         # tied embeddings, as Llama-3.2-1B


def build_model(cfg, max_pos, device, dtype, seed=0):
    """Random weights N(0, 0.02) (transformers' Llama init), created on the device directly."""
    torch.manual_seed(seed)
    with torch.device(device):
        model = Llama(cfg, max_pos, device, dtype).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.endswith("norm.weight"):
                p.normal_(0.0, 0.02)
    return model


# ---------------------------------------------------------------------------------------------
# Attention providers: an SDPA-signature function and a context entered around every model call.

def eager(q, k, v, is_causal=False, enable_gqa=False, scale=None):
    """softmax(Q Kᵀ · scale) V with the scores stored, softmax in fp32 (transformers' "eager")."""
    B, Hq, N, d = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    qg = q.reshape(B, Hkv, Hq // Hkv * N, d)                 # a query group shares its KV head
    s = (qg @ k.transpose(-2, -1)).view(B, Hq, N, Nk).float() * (scale or d ** -0.5)
    if is_causal:
        s.masked_fill_(torch.ones(N, Nk, dtype=torch.bool, device=q.device).triu_(1), -math.inf)
    p = torch.softmax(s, dim=-1).to(q.dtype).view(B, Hkv, Hq // Hkv * N, Nk)
    return (p @ v).view(B, Hq, N, d)


def skip_attention(q, k, v, is_causal=False, enable_gqa=False, scale=None):
    """No attention at all: the rest of the model's time."""
    return q


def reference(q, k, v, is_causal=False, enable_gqa=False, scale=None):
    """SDPA math on float64 copies: the accuracy reference."""
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=is_causal,
                                              enable_gqa=enable_gqa, scale=scale).to(q.dtype)


def repeat_kv(q, k, v, is_causal=False, enable_gqa=False, scale=None):
    """SDPA with K/V heads repeated to Hq (what transformers does for backends without GQA)."""
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)


@dataclass(frozen=True)
class Provider:
    fn: object
    note: str
    devices: tuple = ("cpu", "cuda")
    backend: object = None        # SDPBackend forced around every call
    stores_scores: bool = False   # skipped where B·Hq·N² scores exceed --score-gb


PROVIDERS = {
    "fa": Provider(torch_flashattn.scaled_dot_product_attention,
                   "torch_flashattn.scaled_dot_product_attention (fa::forward; decode: see the decode path)"),
    "sdpa-flash": Provider(F.scaled_dot_product_attention, "SDPA, flash backend (FlashAttention-2)",
                           ("cuda",), SDPBackend.FLASH_ATTENTION),
    "sdpa-cudnn": Provider(F.scaled_dot_product_attention, "SDPA, cuDNN backend", ("cuda",),
                           SDPBackend.CUDNN_ATTENTION),
    "sdpa-efficient": Provider(repeat_kv, "SDPA, memory-efficient backend, K/V heads repeated (it refuses "
                               "enable_gqa)", ("cuda",), SDPBackend.EFFICIENT_ATTENTION),
    "sdpa-cpu": Provider(F.scaled_dot_product_attention, "SDPA, flash backend on CPU (the default CPU kernel)",
                         ("cpu",), SDPBackend.FLASH_ATTENTION),
    "sdpa-math": Provider(F.scaled_dot_product_attention, "SDPA, math backend (scores stored)",
                          backend=SDPBackend.MATH, stores_scores=True),
    "eager": Provider(eager, "matmul, fp32 softmax, matmul; scores stored", stores_scores=True),
    "none": Provider(skip_attention, "attention skipped (returns q): the model's time without attention"),
}
DEFAULT_PROVIDERS = {
    "cuda": ["fa", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math", "eager", "none"],
    "cpu": ["fa", "sdpa-cpu", "sdpa-math", "eager", "none"],
}


@contextlib.contextmanager
def using(model, name, kvcache_op=False):
    """The model with provider `name`'s attention (and its SDPA backend forced) inside the block."""
    p = PROVIDERS[name] if name != "reference" else Provider(reference, "float64 reference")
    model.attn_fn, model.use_kvcache_op = p.fn, kvcache_op and name == "fa"
    try:
        with sdpa_kernel(p.backend) if p.backend is not None else contextlib.nullcontext():
            yield
    finally:
        model.attn_fn, model.use_kvcache_op = F.scaled_dot_product_attention, False


def probe_kvcache_op(device, dtype):
    """(True, note) when fa::forward_kvcache runs on `device` and matches SDPA on a small case."""
    try:
        g = torch.Generator(device).manual_seed(0)
        q = torch.randn(2, 4, 1, 64, generator=g, device=device).to(dtype)
        kc, vc = (torch.randn(2, 2, 40, 64, generator=g, device=device).to(dtype) for _ in range(2))
        kn, vn = (torch.randn(2, 2, 1, 64, generator=g, device=device).to(dtype) for _ in range(2))
        lens = torch.tensor([17, 30], dtype=torch.int32, device=device)
        out = torch.ops.fa.forward_kvcache(q, kc.clone(), vc.clone(), lens, kn, vn)
        for b, n in enumerate(lens.tolist()):
            k = torch.cat((kc[b:b + 1, :, :n], kn[b:b + 1]), 2)
            v = torch.cat((vc[b:b + 1, :, :n], vn[b:b + 1]), 2)
            ref = reference(q[b:b + 1], k, v, enable_gqa=True)
            err = (out[b:b + 1].float() - ref.float()).abs().max().item()
            if not err <= (1e-5 if dtype == torch.float32 else 2e-2):
                return False, f"fa::forward_kvcache on {device} differs from SDPA by {err:.2e}"
        return True, f"fa::forward_kvcache runs on {device}"
    except Exception as e:  # noqa: BLE001  not built for this device yet
        return False, f"fa::forward_kvcache unavailable on {device}: {' '.join(str(e).split())[:160]}"


# ---------------------------------------------------------------------------------------------
# Measurement.

def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, device, budget_s, min_reps=3, max_reps=20, setup=None):
    """Median ms of fn() after one warm-up call; repeats until budget_s is spent (>= min_reps).
    `setup` runs untimed before every call. CUDA events on the GPU, perf_counter on the CPU."""
    def once():
        if setup is not None:
            setup()
        if device == "cuda":
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            return e0.elapsed_time(e1)
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3

    once()
    times = []
    while len(times) < min_reps or (sum(times) < budget_s * 1e3 and len(times) < max_reps):
        times.append(once())
    return statistics.median(times)


def guarded(call):
    """(value, None) or (None, reason); out of memory and backend refusals become a reason."""
    value, reason = probe(call)
    if reason is not None and "out of memory" in reason.lower():
        reason = "out of memory"
    return value, reason


def generate(model, prompt, steps, cache, forced=None, keep_logits=False):
    """Greedy decoding after a prefill into `cache`: (B, steps) tokens, and the logits of each step
    (prefill's last included) when keep_logits. `forced` (B, steps) feeds those tokens instead."""
    N = prompt.shape[1]
    logits = model(prompt, cache, 0)
    tokens, kept = [], [logits.float()] if keep_logits else []
    for i in range(steps):
        tok = logits.argmax(-1, keepdim=True)
        tokens.append(tok)
        if i == steps - 1:
            break
        logits = model(tok if forced is None else forced[:, i:i + 1], cache, N + i)
        if keep_logits:
            kept.append(logits.float())
    return torch.cat(tokens, 1), kept


def check_accuracy(model, names, args, kvcache_op):
    """Prefill logits (every position) and teacher-forced decode logits of each provider against the
    float64-attention reference, on a short prompt; greedy tokens compared with the reference's."""
    cfg, dev = model.cfg, args.device
    B, N, steps = 2, args.check_len, args.check_steps
    ids = torch.randint(0, cfg.vocab, (B, N), device=dev, generator=torch.Generator(dev).manual_seed(1))
    mk = lambda: KVCache(cfg, B, N + steps, device=dev, dtype=model.embed.weight.dtype)  # noqa: E731
    with using(model, "reference"):
        ref_prefill = model(ids, all_logits=True).float()
        ref_tokens, ref_steps = generate(model, ids, steps, mk(), keep_logits=True)
    scale = ref_prefill.abs().max().item()
    out = {"batch": B, "prompt": N, "steps": steps, "max_abs_logit": scale, "providers": {}}
    for name in names:
        if name == "none":
            continue
        with using(model, name, kvcache_op):
            def run():
                pre = (model(ids, all_logits=True).float() - ref_prefill).abs().max().item()
                _, forced = generate(model, ids, steps, mk(), forced=ref_tokens, keep_logits=True)
                dec = max((a - b).abs().max().item() for a, b in zip(forced, ref_steps))
                toks, _ = generate(model, ids, steps, mk())
                same = (toks == ref_tokens).all(1)
                return {"prefill_err": pre, "decode_err": dec, "greedy_identical": int(same.sum()),
                        "greedy_of": B}
            r, reason = guarded(run)
        out["providers"][name] = r if r is not None else {"na": reason}
    # FlashAttention's rule at model level: ours within 2 × the best same-dtype SDPA error + slack
    sdpa_errs = [max(r["prefill_err"], r["decode_err"]) for n, r in out["providers"].items()
                 if n.startswith("sdpa") and "na" not in r]
    fa = out["providers"].get("fa", {})
    if sdpa_errs and "na" not in fa:
        bound = 2 * min(sdpa_errs) + (1e-5 if args.dtype == "fp32" else 1e-3) * scale
        out["fa_bound"] = bound
        out["fa_ok"] = max(fa["prefill_err"], fa["decode_err"]) <= bound
    return out


def score_bytes(B, heads, nq, nk):
    """Bytes a stored-scores provider holds at once: bf16/fp32 scores, fp32 softmax copy."""
    return B * heads * nq * nk * 8


def prefill_point(model, B, N, names, args):
    cfg, dev = model.cfg, args.device
    ids = torch.randint(0, cfg.vocab, (B, N), device=dev, generator=torch.Generator(dev).manual_seed(2))
    point = {"B": B, "N": N, "tokens": B * N, "results": {}}
    for name in names:
        if PROVIDERS[name].stores_scores and score_bytes(B, cfg.heads, N, N) > args.score_gb * 2**30:
            point["results"][name] = {"na": f"skipped: scores need {score_bytes(B, cfg.heads, N, N) / 2**30:.0f} "
                                            f"GiB > --score-gb {args.score_gb:g}"}
            continue
        torch_flashattn.reset_stats()
        with using(model, name):
            ms, reason = guarded(lambda: timed(lambda: model(ids), dev, args.budget))
        if name == "fa":   # which path served ours: every call should be the kernel
            s = torch_flashattn.stats()
            point["fa_calls"] = {"kernel": s["fa"], "sdpa_fallback": s["sdpa"]}
        if dev == "cuda":
            torch.cuda.empty_cache()   # stored-score providers leave large blocks reserved
        point["results"][name] = {"na": reason} if ms is None else {"ms": ms, "tokens_per_s": B * N / ms * 1e3}
    return point


def decode_point(model, B, N, steps, names, args, kvcache_op):
    cfg, dev = model.cfg, args.device
    ids = torch.randint(0, cfg.vocab, (B, N), device=dev, generator=torch.Generator(dev).manual_seed(3))
    cache = KVCache(cfg, B, N + steps, device=dev, dtype=model.embed.weight.dtype)
    state = {}

    def prefill():
        state["logits"] = model(ids, cache, 0)
        sync(dev)

    def decode():   # `steps` greedy tokens after the prefill
        logits = state["logits"]
        for i in range(steps):
            logits = model(logits.argmax(-1, keepdim=True), cache, N + i)

    results = {}
    for name in names:
        if name == "none":
            continue
        if PROVIDERS[name].stores_scores and score_bytes(B, cfg.heads, N, N) > args.score_gb * 2**30:
            results[name] = {"na": f"skipped: prefill scores exceed --score-gb {args.score_gb:g}"}
            continue
        with using(model, name, kvcache_op):
            ms, reason = guarded(lambda: timed(decode, dev, args.budget, min_reps=2, max_reps=3, setup=prefill))
        state.clear()
        if dev == "cuda":
            torch.cuda.empty_cache()
        results[name] = {"na": reason} if ms is None else {
            "ms": ms, "ms_per_step": ms / steps, "tokens_per_s": B * steps / ms * 1e3}
    return {"B": B, "prompt": N, "new_tokens": steps, "results": results}


# ---------------------------------------------------------------------------------------------
# The run.

def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python3 -m bench.model",
                                 description="Prefill and greedy-decode times of a Llama-style model per "
                                             "attention provider.")
    ap.add_argument("--device", choices=["cpu", "cuda"])
    ap.add_argument("--quick", action="store_true", help="small smoke grid (and the tiny config on CPU)")
    ap.add_argument("--config", choices=CONFIGS, help="default: llama-1b on CUDA, tiny on CPU")
    ap.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], help="default: bf16 on CUDA, fp32 on CPU")
    ap.add_argument("--providers", nargs="+", choices=PROVIDERS, help="default: by device")
    ap.add_argument("--n", nargs="+", type=parse_n, help="prefill sequence lengths, e.g. 1k 16k")
    ap.add_argument("--batch", nargs="+", type=int, help="prefill batch sizes")
    ap.add_argument("--max-tokens", type=parse_n, default=65536, help="skip prefill points with B·N above")
    ap.add_argument("--score-gb", type=float, default=20.0,
                    help="skip stored-score providers (math, eager) above this many GiB of scores")
    ap.add_argument("--decode-prompt", nargs="+", type=parse_n, help="decode prompt lengths")
    ap.add_argument("--decode-batch", nargs="+", type=int, help="decode batch sizes")
    ap.add_argument("--new-tokens", type=int, help="greedy tokens per decode run")
    ap.add_argument("--no-decode", action="store_true", help="prefill only")
    ap.add_argument("--decode-path", choices=["auto", "kvcache", "prefix"], default="auto",
                    help="ours in decode: fa::forward_kvcache, fa::forward on the valid prefix, or auto "
                         "(the kvcache op when it runs on the device)")
    ap.add_argument("--check-len", type=int, help="prompt length of the accuracy check")
    ap.add_argument("--check-steps", type=int, default=8, help="decode steps of the accuracy check")
    ap.add_argument("--budget", type=float, help="seconds of timed calls per provider and point")
    ap.add_argument("--threads", type=int, help="CPU threads (torch.set_num_threads)")
    ap.add_argument("--out", type=Path, default=Path("bench/out"),
                    help="write <out>/<name>.{json,md,png} (default bench/out; bench/results for the committed files)")
    ap.add_argument("--name", default="model", help="file stem under --out")
    args = ap.parse_args(argv)

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device")
    cuda, quick = args.device == "cuda", args.quick
    defaults = dict(
        config="llama-1b" if cuda else "tiny",
        dtype="bf16" if cuda else "fp32",
        providers=DEFAULT_PROVIDERS[args.device],
        n=([1024, 4096] if quick else [1024, 2048, 4096, 8192, 16384]) if cuda else
          ([128, 256] if quick else [256, 512, 1024]),
        batch=([1, 2] if quick else [1, 2, 4, 8]) if cuda else ([1, 2] if quick else [1, 2, 4]),
        decode_prompt=([1024] if quick else [1024, 4096]) if cuda else ([64] if quick else [256]),
        decode_batch=[1, 8] if cuda else [1, 2],
        new_tokens=(16 if quick else 64) if cuda else (4 if quick else 16),
        check_len=256 if cuda else 64,
        budget=(0.1 if quick else 0.3) if cuda else (0.05 if quick else 0.5),
    )
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    check_providers(ap, args.providers, args.device, PROVIDERS)
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parsed(parse_args, argv)
    t_start = time.perf_counter()
    dev, cfg = args.device, CONFIGS[args.config]
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    prefill_grid = [(B, N) for N in args.n for B in args.batch if B * N <= args.max_tokens]
    decode_grid = [] if args.no_decode else [(B, N) for N in args.decode_prompt for B in args.decode_batch]
    max_pos = max([N for _, N in prefill_grid] + [N + args.new_tokens for _, N in decode_grid]
                  + [args.check_len + args.check_steps])

    model = build_model(cfg, max_pos, dev, dtype)
    n_params = sum(p.numel() for p in model.parameters())
    kvcache_op, kvcache_note = probe_kvcache_op(dev, dtype)
    if args.decode_path == "kvcache" and not kvcache_op:
        sys.exit(f"--decode-path kvcache: {kvcache_note}")
    kvcache_op = kvcache_op and args.decode_path != "prefix"
    say = lambda *a: print(*a, flush=True)  # noqa: E731
    say(f"model {args.config}: {n_params / 1e6:.1f}M parameters, {dev} {args.dtype}; {kvcache_note}")

    result = {
        "kind": "model",
        "name": args.name,
        "command": shlex.join(["python3", "-m", "bench.model", *argv]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        **environment(dev),
        "config_name": args.config,
        "config": asdict(cfg),
        "parameters": n_params,
        "dtype": args.dtype,
        "timer": ("CUDA events" if dev == "cuda" else "time.perf_counter")
                 + f", 1 warm-up, median of >= 3 runs (decode 2-3) / budget ({args.budget:g} s)",
        "providers": [n for n in args.providers],
        "provider_notes": {n: PROVIDERS[n].note for n in args.providers},
        "decode_path": ("fa::forward_kvcache (append + attend in one op)" if kvcache_op else
                        "fa::forward on the cache's valid prefix (" + ("--decode-path prefix" if
                        args.decode_path == "prefix" else f"fa::forward_kvcache does not run on {dev} in "
                        "this build") + ")"),
        "kvcache_probe": kvcache_note,
    }

    with torch.inference_mode():
        say("accuracy check ...")
        result["accuracy"] = check_accuracy(model, args.providers, args, kvcache_op)
        for name, r in result["accuracy"]["providers"].items():
            say(f"  {name:15} " + (f"n/a: {r['na']}" if "na" in r else
                f"prefill err {r['prefill_err']:.2e}  decode err {r['decode_err']:.2e}  "
                f"greedy identical {r['greedy_identical']}/{r['greedy_of']}"))
        if "fa_ok" in result["accuracy"]:
            say(f"  fa within 2 × SDPA's error + slack ({result['accuracy']['fa_bound']:.2e}): "
                f"{result['accuracy']['fa_ok']}")

        result["prefill"] = []
        for B, N in prefill_grid:
            p = prefill_point(model, B, N, args.providers, args)
            result["prefill"].append(p)
            say(f"prefill B={B} N={N}: " + "  ".join(
                f"{n} {r['ms']:.1f} ms" if "ms" in r else f"{n} n/a" for n, r in p["results"].items()))
        result["decode"] = []
        for B, N in decode_grid:
            p = decode_point(model, B, N, args.new_tokens, args.providers, args, kvcache_op)
            result["decode"].append(p)
            say(f"decode B={B} prompt={N}: " + "  ".join(
                f"{n} {r['tokens_per_s']:.0f} tok/s" if "ms" in r else f"{n} n/a"
                for n, r in p["results"].items()))
    result["wall_s"] = time.perf_counter() - t_start

    table = model_report.markdown(result)
    print("\n" + table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        base = args.out / args.name
        base.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
        base.with_suffix(".md").write_text(table)
        written = [base.with_suffix(".json"), base.with_suffix(".md")]
        if model_report.plot(result, base.with_suffix(".png")):
            written.append(base.with_suffix(".png"))
        print("wrote " + ", ".join(map(str, written)))
    print(f"total {result['wall_s']:.0f} s")
    if result["accuracy"].get("fa_ok") is False:
        sys.exit("fa's logits are outside 2 × SDPA's error: see the accuracy section")


if __name__ == "__main__":
    main()
