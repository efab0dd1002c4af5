"""Times the production forward and decode calls of whichever torch_flashattn is first on the path,
for a before/after comparison of two builds in one GPU session (tools/ab.sh runs both, alternating).

    PYTHONPATH=<build> python3 tools/ab_time.py LABEL [ONLY] >> ab.jsonl   # ONLY: a key prefix, e.g. d256_n8192

Forward: FlashAttention's grid (B·N = 16k tokens, H·d = 2048), bf16, N 1k and 8k, d 64/128/256,
causal and not; TFLOP/s = 4·B·H·N²·d / time, halved when causal. Decode: one query token over a
bf16 KV cache (d = 128) at GPU.md's decode shapes; TB/s of K and V read. Medians of
triton.testing.do_bench (its zero-fill L2 flush). Prints one JSON line.
"""
import json
import sys

import torch
import triton

import torch_flashattn

label = sys.argv[1]
only = sys.argv[2] if len(sys.argv) > 2 else ""
out = {"label": label, "forward": {}, "decode": {}}
torch.manual_seed(0)
for d in (64, 128, 256):
    for n in (1024, 8192):
        for causal in (False, True):
            key = f"d{d}_n{n}_c{int(causal)}"
            if not key.startswith(only):
                continue
            b, h = 16384 // n, 2048 // d
            q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            ms = triton.testing.do_bench(lambda: torch_flashattn.attention(q, k, v, causal=causal), rep=60)
            flops = 4 * b * h * n * n * d / (2 if causal else 1)
            out["forward"][key] = round(flops / ms / 1e9, 1)
for b, hq, hkv, nk in () if only else ((1, 32, 32, 32768), (1, 32, 8, 131072), (8, 32, 8, 8192), (8, 32, 8, 32768),
                       (32, 32, 8, 4096), (64, 32, 32, 2048), (1, 32, 32, 4096)):
    q = torch.randn(b, hq, 1, 128, device="cuda", dtype=torch.bfloat16)
    kc, vc = (torch.randn(b, hkv, nk, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    ms = triton.testing.do_bench(lambda: torch.ops.fa.forward_kvcache(q, kc, vc, None, None, None, None, False),
                                 rep=60)
    out["decode"][f"B{b}_H{hq}-{hkv}_{nk}"] = round(2 * kc.numel() * 2 / ms / 1e9, 3)
print(json.dumps(out))
