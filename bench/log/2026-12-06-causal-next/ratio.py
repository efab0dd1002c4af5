"""Fewer consumers waiting for each K / V stage against every consumer waiting ("all", today's
kernel): the first only ("first", FlashAttention-3's form) and the last a turn ahead ("ahead"),
selected by sm90_kv_wait in one process and one build, timed in rotated rounds
(triton.testing.do_bench, default L2 flush); FlashAttention-3 beside them where its wheel imports
(bf16 only; (B, N, H, d) copies of the same values). B · N = 16k, H · d = 2048. Before the timings,
each point's outputs under the three settings must be the same bits (the order of the arithmetic does
not change). One JSON line per check and per timing; the label names the build.

    PYTHONPATH=<build>[:<fa3>] python3 bench/log/2026-12-06-causal-next/ratio.py LABEL [rounds] >> ratio.jsonl

The switch reaches the d = 64 tile and the d = 128 causal tile from 4096 keys; d = 128 causal 2k
(the plain d = 128 tile) and d = 256 run the same kernel under both names: their ratios are the
call's noise floor.
"""
import json
import sys

import torch
from triton.testing import do_bench

import torch_flashattn
from torch_flashattn._testing import overrides

try:
    from fa3_fwd_interface import flash_attn_func as fa3
except ImportError:
    fa3 = None

label = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
gpu = torch.cuda.get_device_name()
bf, fp = torch.bfloat16, torch.float16
points = [(bf, 128, 2048, True), (bf, 128, 4096, True), (bf, 128, 8192, True), (bf, 128, 16384, True),
          (bf, 64, 8192, True), (bf, 64, 16384, False), (bf, 256, 8192, True), (fp, 128, 8192, True)]
for dt, d, N, causal in points:
    B, H = 16384 // N, 2048 // d
    g = torch.Generator(device="cuda").manual_seed(N + d)
    q, k, v = (torch.randn(B, H, N, d, dtype=dt, device="cuda", generator=g) for _ in range(3))
    ours = lambda: torch_flashattn.attention(q, k, v, causal=causal)
    fns = {"all": ("all", ours), "first": ("first", ours), "ahead": ("ahead", ours)}
    if fa3 is not None and dt == bf:
        qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
        fns["fa3"] = (None, lambda: fa3(qt, kt, vt, causal=causal))
    outs = {}
    for n in ("all", "first", "ahead"):
        with overrides(sm90_kv_wait=n):
            outs[n] = torch_flashattn.attention_lse(q, k, v, causal=causal)
    same = all(torch.equal(a, b) for n in ("first", "ahead") for a, b in zip(outs["all"], outs[n]))
    print(json.dumps({"label": label, "check": "same_bits", "dtype": str(dt)[6:], "d": d, "N": N,
                      "causal": causal, "ok": same}), flush=True)
    del outs
    names = list(fns)
    flops = 4 * B * H * N * N * d / (2 if causal else 1)
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            mode, fn = fns[n]
            with overrides(**({"sm90_kv_wait": mode} if mode else {})):
                ms = do_bench(fn, warmup=25, rep=100)
            print(json.dumps({"label": label, "gpu": gpu, "dtype": str(dt)[6:], "d": d, "N": N, "causal": causal,
                              "round": r, "who": n, "ms": ms, "tflops": flops / ms / 1e9}), flush=True)
    del q, k, v
    torch.cuda.empty_cache()
