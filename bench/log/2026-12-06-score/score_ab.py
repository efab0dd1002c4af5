"""Plain forward calls timed (do_bench medians), one JSON line each: ratio.py's 9 points on the
automatic family and 3 of them with family="sm80"; B · N = 16k, H · d = 2048.
    PYTHONPATH=<build> python3 /tmp/score_ab.py LABEL ROUND"""
import json, os, sys
import torch
from triton.testing import do_bench
import torch_flashattn
from torch_flashattn._testing import overrides
label, rnd = sys.argv[1], int(sys.argv[2])
points = [(torch.bfloat16, 64, 4096, True), (torch.bfloat16, 64, 4096, False), (torch.bfloat16, 128, 2048, True),
          (torch.bfloat16, 128, 4096, True), (torch.bfloat16, 128, 4096, False), (torch.bfloat16, 128, 8192, True),
          (torch.bfloat16, 128, 16384, False), (torch.bfloat16, 256, 4096, True), (torch.float16, 128, 8192, True)]
runs = [("auto", p) for p in points] + [("sm80", p) for p in (points[0], points[4], points[7])]
if os.environ.get("SCORE_AB_POINTS") == "long":     # call 3: the Hopper points that moved most, and fp16
    runs = [("auto", p) for p in [(torch.float16, 128, 4096, True), (torch.float16, 128, 8192, True),
                                  (torch.float16, 128, 16384, True), (torch.bfloat16, 128, 8192, True),
                                  (torch.bfloat16, 128, 16384, True), (torch.bfloat16, 128, 16384, False),
                                  (torch.float16, 128, 16384, False), (torch.bfloat16, 128, 2048, True),
                                  (torch.bfloat16, 64, 8192, True), (torch.float16, 256, 8192, True)]]
for family, (dt, d, N, causal) in runs:
    B, H = 16384 // N, 2048 // d
    g = torch.Generator(device="cuda").manual_seed(N + d)
    q, k, v = (torch.randn(B, H, N, d, dtype=dt, device="cuda", generator=g) for _ in range(3))
    with overrides(family=family):
        ms = do_bench(lambda: torch_flashattn.attention(q, k, v, causal=causal), warmup=25, rep=100)
    flops = 4 * B * H * N * N * d / (2 if causal else 1)
    print(json.dumps({"label": label, "round": rnd, "family": family, "dtype": str(dt)[6:], "d": d, "N": N,
                      "causal": causal, "ms": ms, "tflops": flops / ms / 1e9}), flush=True)
