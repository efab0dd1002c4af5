"""Each variant against our dense kernel on the same tensors, in one process (whichever
torch_flashattn is first on the path): dense, sinks, ALiBi and softcap 30 timed in rotated rounds
(triton.testing.do_bench, default L2 flush), bf16 unless named, B · N = 16k, H · d = 2048. First
each variant's largest difference from the exact path (torch_flashattn._testing.exact_path). One
JSON line per timing; the label names the build.

    PYTHONPATH=<build> python3 bench/log/2026-12-06-alibi-v3/ratio.py LABEL [rounds] >> ratio.jsonl

WHO=dense,sinks: those providers alone. alibi_var: ALiBi with sinks of −inf (the same problem:
exp(−inf) adds nothing), which ALiBi with sinks sends to the variant kernel: ALiBi's kernel before
the plain tiles took it, timed in the same process.
"""
import json
import os
import sys

import torch
from triton.testing import do_bench

import torch_flashattn
from torch_flashattn._testing import exact_path

label = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
gpu = torch.cuda.get_device_name()
points = [(torch.bfloat16, 64, 4096, True), (torch.bfloat16, 64, 4096, False), (torch.bfloat16, 128, 2048, True),
          (torch.bfloat16, 128, 4096, True), (torch.bfloat16, 128, 4096, False), (torch.bfloat16, 128, 8192, True),
          (torch.bfloat16, 128, 16384, False), (torch.bfloat16, 256, 4096, True), (torch.float16, 128, 8192, True)]
for dt, d, N, causal in points:
    B, H = 16384 // N, 2048 // d
    g = torch.Generator(device="cuda").manual_seed(N + d)
    q, k, v = (torch.randn(B, H, N, d, dtype=dt, device="cuda", generator=g) for _ in range(3))
    kws = {"dense": {}, "sinks": {"sinks": torch.randn(H, device="cuda", generator=g)},
           "alibi": {"alibi_slopes": torch.tensor([2 ** (-8 * (h + 1) / H) for h in range(H)], device="cuda")},
           "softcap": {"softcap": 30.0}}
    kws["alibi_var"] = dict(kws["alibi"], sinks=torch.full((H,), float("-inf"), device="cuda"))
    kws = {n: kw for n, kw in kws.items() if n in os.environ.get("WHO", ",".join(kws)).split(",")}
    fns = {n: (lambda kw=kw: torch_flashattn.attention(q, k, v, causal=causal, **kw)) for n, kw in kws.items()}
    for n, fn in fns.items():
        got = fn()
        with exact_path():
            want = fn()
        print(json.dumps({"label": label, "check": n, "dtype": str(dt)[6:], "d": d, "N": N, "causal": causal,
                          "max_err": (got.float() - want.float()).abs().max().item()}), flush=True)
    names = list(fns)
    flops = 4 * B * H * N * N * d / (2 if causal else 1)
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            ms = do_bench(fns[n], warmup=25, rep=100)
            print(json.dumps({"label": label, "gpu": gpu, "dtype": str(dt)[6:], "d": d, "N": N, "causal": causal,
                              "round": r, "who": n, "ms": ms, "tflops": flops / ms / 1e9}), flush=True)
    del q, k, v
    torch.cuda.empty_cache()
