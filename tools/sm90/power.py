# SM clock and board power while one attention call runs back to back: the clock the power cap
# leaves each provider, dtype and shape. Each point runs its call in a loop for --seconds while
# nvidia-smi samples clocks.sm and power.draw every 50 ms; the first 0.5 s is dropped (ramp), and
# the medians of the rest are printed with the loop's TFLOP/s (no L2 flush: back-to-back calls).
#
#   python3 -m tools.sm90.power                      # d = 128 non-causal, 4k and 16k, bf16 and fp16
#   python3 -m tools.sm90.power --n 4096 --providers fa
import argparse
import statistics
import subprocess
import time

import torch

from bench.attention import DTYPES, PROVIDERS


def call_of(name, q, k, v):
    """bench.attention's provider `name` as a no-argument call (non-causal, scale 1/sqrt(d))."""
    provider, scale = PROVIDERS[name], q.shape[-1] ** -0.5

    def call():
        with provider.context():
            return provider.run(q, k, v, False, scale)
    return call


def sample(fn, seconds):
    """Runs fn back to back for `seconds`; returns (calls/s, [(t, MHz, W)] sampled meanwhile)."""
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                            "-lms", "50"], stdout=subprocess.PIPE, text=True)
    t0 = time.time()
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n, first = 0, None
    while time.time() - t0 < seconds:
        for _ in range(20):
            fn()
        n += 20
        if first is None:
            torch.cuda.synchronize()
            start.record()
            first = n
    end.record()
    torch.cuda.synchronize()
    smi.terminate()
    out, _ = smi.communicate()
    rate = (n - first) / (start.elapsed_time(end) / 1e3)
    rows = []
    for i, line in enumerate(out.strip().splitlines()):
        try:
            mhz, w = (float(x) for x in line.split(","))
        except ValueError:
            continue
        rows.append((0.05 * i, mhz, w))
    return rate, rows


def main():
    ap = argparse.ArgumentParser(prog="python3 -m tools.sm90.power", description="SM clock and board power "
                                 "while one attention call runs back to back (nvidia-smi samples).")
    ap.add_argument("--providers", nargs="+", default=["fa", "sdpa-cudnn"], choices=list(PROVIDERS))
    ap.add_argument("--dtype", nargs="+", default=["bf16", "fp16"], choices=["bf16", "fp16"])
    ap.add_argument("--n", nargs="+", type=int, default=[4096, 16384])
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=2.5)
    args = ap.parse_args()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; B·N = 16384, H·d = 2048, non-causal, "
          f"d = {args.d}; medians over the samples after the first 0.5 s")
    print(f"{'provider':12} {'dtype':5} {'N':>6} {'TFLOP/s':>8} {'SM MHz':>7} {'W':>6} {'samples':>7}")
    for n in args.n:
        B, H = max(1, 16384 // n), 2048 // args.d
        for dt in args.dtype:
            q, k, v = (torch.randn(B, H, n, args.d, dtype=DTYPES[dt], device="cuda") for _ in range(3))
            flops = 4 * B * H * n * n * args.d
            for prov in args.providers:
                rate, rows = sample(call_of(prov, q, k, v), args.seconds)
                kept = [r for r in rows if r[0] >= 0.5] or rows
                mhz = statistics.median(r[1] for r in kept)
                w = statistics.median(r[2] for r in kept)
                print(f"{prov:12} {dt:5} {n:6d} {flops * rate / 1e12:8.1f} {mhz:7.0f} {w:6.0f} {len(kept):7d}")
            del q, k, v


if __name__ == "__main__":
    main()
