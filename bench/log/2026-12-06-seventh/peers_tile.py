"""d = 128 non-causal calls (and the varlen points of bench.variants) on our two Hopper tiles beside
FlashAttention-3 and SDPA's cuDNN, in one process: "fa" (the build's rule), "fa off" (the 2-consumer
128 x 128 tile at every length), "fa on" (the 3-consumer 80-key tile at every length), FA3 (bf16,
when importable) and cuDNN (dense and key_mask points). Each of our modes is first compared with an
fp64 reference on one head of one sequence (error <= 2 x SDPA's same-dtype error + 1e-5; a failure is
printed). Timing: bench.attention.time_interleaved (providers call by call in turn, zero-fill L2
flush), TFLOP/s over the visible pairs; ROUNDS rounds, medians. JSON lines, a table last.

    python3 bench/log/2026-12-06-seventh/peers_tile.py ROUNDS > peers_tile.txt
"""
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_flashattn
from torch_flashattn._testing import overrides
from bench.attention import time_interleaved

BF, HF = torch.bfloat16, torch.float16
D = 128
MODES = {"fa": {}, "fa off": {"sm90_long_tile": "off"}, "fa on": {"sm90_long_tile": "on"}}
try:
    from fa3_fwd_interface import flash_attn_func as fa3, flash_attn_varlen_func as fa3_varlen
except ImportError:
    fa3 = fa3_varlen = None

# (name, B, H, Nq, Nk, dtype, kind): kind "dense" (or "window L": a non-causal (L, L) window),
# "varlen" (8 sequences of N/4 .. N, as bench.variants'), "varlen causal", "key_mask" (a padded
# batch, 40-100 % of N valid). FlashAttention's grid (B·N = 16k, H = 16), then fewer CTAs.
POINTS = [(f"bf16 {n}", 16384 // n, 16, n, n, BF, "dense") for n in (1024, 2048, 3072, 4096, 6144, 8192, 16384)]
POINTS += [(f"fp16 {n}", 16384 // n, 16, n, n, HF, "dense") for n in (2048, 4096)]
POINTS += [("B1 H16 2k", 1, 16, 2048, 2048, BF, "dense"), ("B1 H16 4k", 1, 16, 4096, 4096, BF, "dense"),
           ("B1 H32 6k", 1, 32, 6144, 6144, BF, "dense"), ("Nq 1k Nk 6k", 4, 16, 1024, 6144, BF, "dense"),
           ("window 1024 4k", 4, 16, 4096, 4096, BF, "window 1024"),
           ("varlen 8 x 1k-4k", 8, 16, 4096, 4096, BF, "varlen"),
           ("varlen 8 x 1k-4k causal", 8, 16, 4096, 4096, BF, "varlen causal"),
           ("varlen 8 x 0.5k-2k", 8, 16, 2048, 2048, BF, "varlen"),
           ("key_mask 8 x 4k 40-100%", 8, 16, 4096, 4096, BF, "key_mask")]


def lengths_of(B, N, lo):
    return [int(N * (lo + (1 - lo) * b / (B - 1))) for b in range(B)]


def reference(q, k, v, causal=False, mask=None):
    with sdpa_kernel(SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask, is_causal=causal)
        same = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal).double()
    return ref, (same - ref).abs().max().item()


def setup(B, H, Nq, Nk, dt, kind):
    """(calls by provider, visible pairs over the batch, (ours, output slice, fp64 reference, SDPA's error))."""
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, n, D, device="cuda", dtype=dt, generator=g) for n in (Nq, Nk, Nk))
    N = Nk
    calls, causal = {}, kind == "varlen causal"
    if kind.startswith("varlen"):
        lens = lengths_of(B, N, 0.25)
        cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
        pack = lambda x: torch.cat([x[b, :, :n].transpose(0, 1) for b, n in enumerate(lens)]).contiguous()  # noqa: E731
        qp, kp, vp = pack(q), pack(k), pack(v)
        ours = lambda: torch_flashattn.attention_varlen(qp, kp, vp, cu, cu, N, N, causal=causal)  # noqa: E731
        pairs = sum(n * (n + 1) // 2 if causal else n * n for n in lens)
        n0 = lens[1]                                  # sequence 1, head 0: a boundary not on a tile edge
        ref, err = reference(q[1:2, :1, :n0], k[1:2, :1, :n0], v[1:2, :1, :n0], causal=causal)
        view = lambda o: o[lens[0]:lens[0] + n0, 0].double()[None, None]  # noqa: E731
        if fa3_varlen is not None:
            calls["fa3"] = lambda: fa3_varlen(qp, kp, vp, cu, cu, N, N, causal=causal)
    elif kind == "key_mask":
        lens = lengths_of(B, N, 0.4)
        valid = torch.arange(N, device="cuda")[None, :] < torch.tensor(lens, device="cuda")[:, None]
        ours = lambda: torch_flashattn.attention(q, k, v, key_mask=valid)  # noqa: E731
        pairs = sum(N * n for n in lens)
        ref, err = reference(q[:1, :1], k[:1, :1], v[:1, :1], mask=valid[:1, None, None, :])
        view = lambda o: o[:1, :1].double()  # noqa: E731
        m = valid[:, None, None, :]
        calls["cudnn"] = lambda: _cudnn(q, k, v, m)
    else:
        left = int(kind.split()[1]) if kind.startswith("window") else -1
        i, j = torch.arange(Nq, device="cuda")[:, None], torch.arange(Nk, device="cuda")
        vis = (j >= i - left) & (j <= i + left) if left >= 0 else None
        ours = lambda: torch_flashattn.attention(q, k, v, window=(left, left))  # noqa: E731
        pairs = B * (Nq * Nk if vis is None else vis.sum().item())
        ref, err = reference(q[-1:, :1], k[-1:, :1], v[-1:, :1], mask=vis)
        view = lambda o: o[-1:, :1].double()  # noqa: E731
        calls["cudnn"] = lambda: _cudnn(q, k, v, vis)
        if fa3 is not None and dt == BF and left < 0:   # the fa3-fwd wheel has no local attention
            qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
            calls["fa3"] = lambda: fa3(qt, kt, vt)
    for m, ov in MODES.items():
        calls[m] = _forced(ours, ov)
    return calls, pairs, (ours, view, ref, err)


def _cudnn(q, k, v, m):
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)


def _forced(fn, ov):
    def call():
        with overrides(**ov):
            return fn()
    return call


rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
print(json.dumps({"gpu": torch.cuda.get_device_name(), "rounds": rounds, "fa3": fa3 is not None}), flush=True)
tflops, fails = {}, 0
for r in range(rounds):
    for name, B, H, Nq, Nk, dt, kind in POINTS:
        calls, pairs, (ours, view, ref, err_pt) = setup(B, H, Nq, Nk, dt, kind)
        if r == 0:
            for m, ov in MODES.items():
                with overrides(**ov):
                    err = (view(ours()) - ref).abs().max().item()
                ok = err <= 2 * err_pt + 1e-5
                fails += not ok
                print(json.dumps({"check": name, "mode": m, "err": err, "err_sdpa": err_pt, "ok": ok}), flush=True)
        names = list(calls)
        ms = time_interleaved([calls[c] for c in names], 0.4)
        row = tflops.setdefault(name, {})
        for c, t in zip(names, ms):
            row.setdefault(c, []).append(4 * H * pairs * D / t / 1e9)
        print(json.dumps({"round": r, "point": name, **{c: round(row[c][-1], 1) for c in names}}), flush=True)
        del calls
print(f"checks failed: {fails}")
cols = ["fa", "fa off", "fa on", "fa3", "cudnn"]
print(f"{'point':26s}" + "".join(f"{c:>8s}" for c in cols) + "  off/on  off/best-peer  on/best-peer")
for name, row in tflops.items():
    med = {c: statistics.median(v) for c, v in row.items()}
    peer = max([med[c] for c in ("fa3", "cudnn") if c in med] or [float("nan")])
    print(f"{name:26s}" + "".join(f"{med[c]:8.1f}" if c in med else f"{'-':>8s}" for c in cols)
          + f"  {med['fa off'] / med['fa on']:.3f}  {med['fa off'] / peer:.3f}  {med['fa on'] / peer:.3f}")
