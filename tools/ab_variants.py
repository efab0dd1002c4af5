"""Times the variant calls of bench/variants.py (its POINTS, bf16, d = 128, H = 16; plus d = 64 and
256 points) with whichever torch_flashattn is first on the path, beside that build's dense call on
the same tensors, for a before/after comparison of two builds in one GPU session (tools/ab.sh with
TIMER=tools/ab_variants.py runs both, alternating). TFLOP/s over the visible pairs; each call's
largest difference from the exact path is printed too, so that a broken build shows.

    PYTHONPATH=<build> python3 tools/ab_variants.py LABEL [ONLY] >> ab.jsonl   # ONLY: words of point names
"""
import json
import sys
from pathlib import Path

import torch
import triton

import torch_flashattn
from torch_flashattn._testing import exact_path

sys.path.append(str(Path(__file__).resolve().parent.parent))    # bench/ of this tree, after the build
from bench.variants import POINTS, make, packed, point, visible_pairs  # noqa: E402

label = sys.argv[1]
only = sys.argv[2:]
EXTRA = [(64, point("d64 sinks causal, 4k", 8, 4096, 4096, causal=True, sinks=True)),
         (64, point("d64 softcap 30, 4k", 8, 4096, 4096, softcap=30.0)),
         (256, point("d256 sliding (1024, 0), 8k", 1, 8192, 8192, causal=True, window=(1024, -1))),
         (256, point("d256 softcap 30 causal, 4k", 2, 4096, 4096, causal=True, softcap=30.0)),
         (128, point("ALiBi, 4k", 4, 4096, 4096, alibi=True)),
         (64, point("d64 ALiBi causal, 4k", 8, 4096, 4096, causal=True, alibi=True)),
         (256, point("d256 softcap 50, 4k", 2, 4096, 4096, softcap=50.0))]
out = {"label": label, "tflops": {}, "dense": {}, "err": {}}
for d, p in [(128, p) for p in POINTS] + EXTRA:
    if only and not any(w in p["name"] for w in only):
        continue
    H = 2048 // d
    q, k, v, kw, lengths = make(p, H, d, torch.bfloat16)
    if p["varlen"]:
        pk = packed(p, q, k, v, lengths)
        fn = lambda: torch_flashattn.attention_varlen(pk[0], pk[1], pk[2], pk[3], pk[3], pk[4], pk[4],  # noqa: E731
                                                      causal=p["causal"])
    else:
        fn = lambda: torch_flashattn.attention(q, k, v, **kw)  # noqa: E731
    dense = lambda: torch_flashattn.attention(q, k, v, causal=p["causal"] and p["align"] == "top_left")  # noqa: E731
    got = fn()
    with exact_path():
        want = fn()
    out["err"][p["name"]] = (got.float() - want.float()).abs().max().item()
    flops = 4.0 * d * H * visible_pairs(p, lengths)
    out["tflops"][p["name"]] = round(flops / triton.testing.do_bench(fn, rep=100) / 1e9, 1)
    out["dense"][p["name"]] = round(flops / triton.testing.do_bench(dense, rep=100) / 1e9, 1)
    del q, k, v, kw
    torch.cuda.empty_cache()
print(json.dumps(out))
