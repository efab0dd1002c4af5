"""SM clock and board power while one kernel runs back to back: bf16 against fp16, the plain Hopper
d = 128 causal tile (B = 2, H = 16, N = 8192) and the d = 256 causal tile (B = 2, H = 8, N = 8192).
nvidia-smi samples every 50 ms in the background; each run lasts about 3 s; JSON lines out.
    PYTHONPATH=<build> python3 bench/log/2026-12-06-third/clocks.py LABEL ROUND >> clocks.jsonl
"""
import json, statistics, subprocess, sys, time
import torch
import torch_flashattn

def run(dt, d, N, B, secs=3.0):
    H = 2048 // d
    q, k, v = (torch.randn(B, H, N, d, dtype=dt, device="cuda") for _ in range(3))
    f = lambda: torch_flashattn.attention(q, k, v, causal=True)
    for _ in range(5): f()
    torch.cuda.synchronize()
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                            "-lms", "50"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n, t0 = 0, time.time()
    e0.record()
    while time.time() - t0 < secs:
        for _ in range(20): f()
        n += 20
        torch.cuda.synchronize()
    e1.record(); torch.cuda.synchronize()
    smi.terminate(); out = smi.communicate()[0]
    s = [tuple(float(x) for x in line.split(",")) for line in out.strip().splitlines()[8:-2]]
    ms = e0.elapsed_time(e1) / n
    flops = 4 * B * H * N * N * d / 2
    print(json.dumps({"label": sys.argv[1], "round": int(sys.argv[2]), "dtype": str(dt)[6:], "d": d, "N": N, "B": B, "ms": ms, "tflops": flops / ms / 1e9,
                      "clock_mhz": statistics.median(x[0] for x in s), "power_w": statistics.median(x[1] for x in s),
                      "samples": len(s)}), flush=True)

rnd = int(sys.argv[2])
for dt in (torch.bfloat16, torch.float16) if rnd % 2 else (torch.float16, torch.bfloat16):
    run(dt, 128, 8192, 2)
    run(dt, 256, 8192, 2)
