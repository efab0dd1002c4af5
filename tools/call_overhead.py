# Host time of one inference call (torch.no_grad), dispatched below the autograd key
# (torch_flashattn._autograd.call) against through the Python wrapper torch.library.register_autograd
# installs: tiny tensors, so the time is the call's host work. Rounds alternate the two ways; medians.
#
#   python3 -m tools.call_overhead              # CPU (its C backend's work included)
#   python3 -m tools.call_overhead --device cuda
import argparse
import statistics
import time

import torch

import torch_flashattn
from torch_flashattn import _autograd


def per_call_us(fn, n):
    for _ in range(n // 10):
        fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    dtype = torch.float32 if args.device == "cpu" else torch.bfloat16
    q = torch.randn(1, 2, 1, 16, device=args.device, dtype=dtype)
    k, v = (torch.randn(1, 1, 8, 16, device=args.device, dtype=dtype) for _ in range(2))
    km = torch.ones(1, 8, dtype=torch.bool, device=args.device)
    calls = {
        "attention": lambda: torch_flashattn.attention(q, k, v),
        "attention, key_mask": lambda: torch_flashattn.attention(q, k, v, causal=True, causal_align="bottom_right",
                                                                 key_mask=km),
        "SDPA drop-in": lambda: torch_flashattn.scaled_dot_product_attention(q, k, v),
    }
    below = _autograd._BELOW_AUTOGRAD
    with torch.no_grad():
        for name, fn in calls.items():
            times = {"below autograd": [], "through the wrapper": []}
            for r in range(args.rounds):
                for way in (list(times) if r % 2 == 0 else list(times)[::-1]):
                    _autograd._BELOW_AUTOGRAD = below if way == "below autograd" else None
                    times[way].append(per_call_us(fn, args.calls))
            _autograd._BELOW_AUTOGRAD = below
            print(f"{name:20} " + "   ".join(f"{w} {statistics.median(t):.1f} µs" for w, t in times.items()),
                  flush=True)


if __name__ == "__main__":
    main()
