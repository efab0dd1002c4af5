"""SDPA reference rows for tools/sm80/tune.cu: the flash and cudnn backends of PyTorch SDPA, bf16,
on the same grid (B·N = 16384, H·d = 2048, N in {1k, 4k, 16k}, causal and not), measured in the
same run. Prints "backend d N causal tflops" lines (TFLOP/s = 4·B·H·N²·d / t, halved when causal;
median of CUDA-event timings after warm-up).

    python3 tools/sm80/sdpa.py > /tmp/sdpa.txt && /tmp/sm80_tune/tune --ref /tmp/sdpa.txt
"""
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def median_ms(fn, reps=30):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


def main():
    for d in (64, 128, 256):
        for n in (1024, 4096, 16384):
            b, h = 16384 // n, 2048 // d
            q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            for causal in (0, 1):
                for name, backend in BACKENDS.items():
                    try:
                        with sdpa_kernel(backend):
                            ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal)))
                    except RuntimeError as err:  # a backend refusing the shape
                        print(f"# {name} d={d} N={n} causal={causal}: {str(err).splitlines()[0]}", file=sys.stderr)
                        continue
                    tflops = 4 * b * h * n * n * d / (2 if causal else 1) / (ms * 1e9)
                    print(f"{name} {d} {n} {causal} {tflops:.1f}", flush=True)


if __name__ == "__main__":
    main()
