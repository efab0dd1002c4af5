"""Times d = 128 non-causal calls on the two Hopper tiles FA_SM90_LONG_NK switches between, in one
process: "auto" (the build's rule), "off" (the 2-consumer 128 x 128 tile at every length) and "on"
(the 3-consumer 80-key tile at every length), through overrides(sm90_long_tile=...). Plain calls on
FlashAttention's grid (B·N = 16k, H = 16) and on fewer CTAs, fp16 beside bf16, Nq != Nk, and the
variant calls that take the same switch (key_mask, a non-causal window). Each call under "off" and
"on" is first compared with an fp64 reference on its last batch entry and first head (our error <=
2 x SDPA's same-dtype error + 1e-5; a failure is printed). TFLOP/s over the visible pairs, do_bench
medians; the modes rotated point by point and round by round. JSON lines to stdout, a table last.

    python3 bench/log/2026-12-06-sixth/long_nk_time.py ROUNDS > long_nk_ab.txt
"""
import json
import statistics
import sys

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_flashattn
from torch_flashattn._testing import overrides

BF, HF = torch.bfloat16, torch.float16
MODES = {"auto": {}, "off": {"sm90_long_tile": "off"}, "on": {"sm90_long_tile": "on"}}
# (name, B, H, Nq, Nk, dtype, variant)
POINTS = [(f"grid {n}", 16384 // n, 16, n, n, BF, {}) for n in (1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384)]
POINTS += [("B1 H16 2k", 1, 16, 2048, 2048, BF, {}), ("B1 H16 4k", 1, 16, 4096, 4096, BF, {}),
           ("B1 H32 6k", 1, 32, 6144, 6144, BF, {}), ("B1 H8 16k", 1, 8, 16384, 16384, BF, {}),
           ("B2 H8 4k", 2, 8, 4096, 4096, BF, {}),
           ("fp16 grid 2048", 8, 16, 2048, 2048, HF, {}), ("fp16 grid 4096", 4, 16, 4096, 4096, HF, {}),
           ("fp16 grid 16384", 1, 16, 16384, 16384, HF, {}),
           ("Nq 512 Nk 4k", 8, 16, 512, 4096, BF, {}), ("Nq 1k Nk 6k", 4, 16, 1024, 6144, BF, {}),
           ("key_mask 4k 25%", 4, 16, 4096, 4096, BF, {"key_mask": 0.25}),
           ("key_mask 16k 25%", 1, 16, 16384, 16384, BF, {"key_mask": 0.25}),
           ("window 1024 4k", 4, 16, 4096, 4096, BF, {"window": (1024, 1024)})]


def make(B, H, Nq, Nk, dt, var):
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, n, 128, device="cuda", dtype=dt, generator=g) for n in (Nq, Nk, Nk))
    args, pairs, mask = {}, Nq * Nk, None                  # mask: the last batch entry's, for the check
    if "key_mask" in var:
        valid = torch.ones(B, Nk, dtype=torch.bool, device="cuda")
        for b in range(B):                                 # 0 .. 2x the fraction padded; mean: the fraction
            valid[b, Nk - int(2 * var["key_mask"] * Nk * b / max(B - 1, 1)):] = False
        args["key_mask"], pairs = valid, Nq * valid.sum().item() / B
        mask = valid[B - 1:, None, None, :]
    if "window" in var:
        (left, right), i, j = var["window"], torch.arange(Nq, device="cuda")[:, None], torch.arange(Nk, device="cuda")
        mask = (j >= i - left) & (j <= i + right)
        args["window"], pairs = var["window"], mask.sum().item()
    return q, k, v, args, pairs, mask


rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
print(json.dumps({"gpu": torch.cuda.get_device_name(), "rounds": rounds}), flush=True)
tflops = {p[0]: {m: [] for m in MODES} for p in POINTS}
fails = 0
for r in range(rounds):
    for i, (name, B, H, Nq, Nk, dt, var) in enumerate(POINTS):
        q, k, v, args, pairs, mask = make(B, H, Nq, Nk, dt, var)
        fn = lambda: torch_flashattn.attention(q, k, v, **args)  # noqa: E731
        if r == 0:
            q1, k1, v1 = q[B - 1:, :1], k[B - 1:, :1], v[B - 1:, :1]
            with sdpa_kernel(SDPBackend.MATH):
                ref = F.scaled_dot_product_attention(q1.double(), k1.double(), v1.double(), attn_mask=mask)
                pt = F.scaled_dot_product_attention(q1, k1, v1, attn_mask=mask).double()
            err_pt = (pt - ref).abs().max().item()
            for m in ("off", "on"):
                with overrides(**MODES[m]):
                    err = (fn()[B - 1:, :1].double() - ref).abs().max().item()
                ok = err <= 2 * err_pt + 1e-5
                fails += not ok
                print(json.dumps({"check": name, "mode": m, "err": err, "err_sdpa": err_pt, "ok": ok}), flush=True)
        order = list(MODES)[(r + i) % 3:] + list(MODES)[:(r + i) % 3]
        for m in order:
            with overrides(**MODES[m]):
                ms = triton.testing.do_bench(fn, rep=100)
            tflops[name][m].append(4 * B * H * pairs * 128 / ms / 1e9)
        print(json.dumps({"round": r, "point": name, **{m: round(tflops[name][m][-1], 1) for m in MODES}}), flush=True)
print(f"checks failed: {fails}")
print(f"{'point':18s} {'auto':>7s} {'off':>7s} {'on':>7s}  off/on  (medians of {rounds} rounds, TFLOP/s)")
for name in tflops:
    med = {m: statistics.median(tflops[name][m]) for m in MODES}
    print(f"{name:18s} {med['auto']:7.1f} {med['off']:7.1f} {med['on']:7.1f}  {med['off'] / med['on']:.3f}")
