# Where a decode call's fixed cost goes: ours (fa::forward_kvcache) against SDPA's cuDNN backend on
# three decode shapes (bf16, d = 128, one query token), each timed five ways, L2 flushed by a
# 256 MB read before every call:
#
#   events  CUDA events around the call (what bench.decode --flush read reports)
#   ahead   the same, with the whole loop queued behind a sleep kernel: host time cannot show
#   graph   the call captured once in a CUDA graph, replays timed with events
#   kernels CUPTI (torch.profiler): per call, the sum of the call's kernel durations, and the span
#           from its first kernel's start to its last kernel's end (kernels and the gaps between)
#   host    host time per call (perf_counter over calls queued without a sync)
#
# After the kernel names: each kernel's median start after the call's first kernel and its median
# duration, µs. Then ours again with the splits merged by the combine kernel instead of inside a
# cluster (overrides(decode_cluster="off"), "combine") and with the split count forced
# (decode_splits) to each of --splits.
#
#   python3 -m tools.decode_gap            # on the GPU machine, ~30 s
import argparse
import statistics
import time

import torch
from torch.autograd import DeviceType
from torch.nn.attention import SDPBackend
from torch.profiler import ProfilerActivity, profile

from bench.decode import Shape, sdpa_call

SHAPES = [Shape(1, 32, 32, 4096), Shape(8, 32, 8, 8192), Shape(1, 32, 8, 131072), Shape(1, 32, 32, 32768)]
REPS = 50


def time_events(fn, flush, ahead=False):
    for _ in range(5):
        fn()
    events = [[torch.cuda.Event(enable_timing=True) for _ in range(2)] for _ in range(REPS)]
    torch.cuda.synchronize()
    if ahead:
        torch.cuda._sleep(int(2e7))             # ~10 ms: the host queues every call before the GPU starts
    for e0, e1 in events:
        flush.amax()
        e0.record()
        fn()
        e1.record()
    torch.cuda.synchronize()
    return statistics.median(e0.elapsed_time(e1) for e0, e1 in events) * 1e3


def time_graph(fn, flush):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return time_events(graph.replay, flush)


def kernel_times(fn, flush):
    """Median over calls of (sum of the call's kernel durations, first start to last end), µs."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(REPS):
            flush.amax()
            fn()
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA),
                     key=lambda e: e.time_range.start)
    # The flush is the reduction kernel(s) of amax; a call is the kernels between two flushes.
    calls, cur = [], None
    for e in kernels:
        if "reduce" in e.name:
            cur = None
            continue
        if cur is None:
            cur = []
            calls.append(cur)
        cur.append(e)
    busy = statistics.median(sum(e.time_range.elapsed_us() for e in c) for c in calls)
    span = statistics.median(max(e.time_range.end for e in c) - c[0].time_range.start for c in calls)
    # Per kernel: median start after the call's first kernel started, and median duration.
    per = {}
    for c in calls:
        for e in c:
            per.setdefault(short_name(e.name), []).append((e.time_range.start - c[0].time_range.start,
                                                           e.time_range.elapsed_us()))
    kernels = [f"{n} +{statistics.median(x[0] for x in v):.1f}/{statistics.median(x[1] for x in v):.1f}"
               for n, v in sorted(per.items(), key=lambda kv: statistics.median(x[0] for x in kv[1]))]
    return busy, span, len(calls), kernels


def short_name(name):
    """A kernel's name without its template arguments and parameters, at most 40 characters."""
    for cut in ("<", "("):
        name = name.split(cut)[0]
    return name.replace("void ", "").replace("cudnn_generated_fort_native_sdpa_", "cudnn_")[:40]


def host_time(fn):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e8))                 # the GPU stays busy: launches never wait on it
    t0 = time.perf_counter()
    for _ in range(REPS):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / REPS * 1e6


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m tools.decode_gap", description="where a decode call's fixed cost goes")
    ap.add_argument("--splits", nargs="*", type=int, default=[4, 8, 16, 32, 64])
    splits = ap.parse_args(argv).splits
    import torch_flashattn  # noqa: F401  (registers torch.ops.fa.*)
    from torch_flashattn._testing import overrides
    flush = torch.zeros(64 << 20, dtype=torch.float32, device="cuda")      # 256 MB
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; µs per call, median of {REPS}")
    print(f"{'shape':24} {'provider':6} {'events':>7} {'ahead':>7} {'graph':>7} {'busy':>7} {'span':>7} "
          f"{'host':>6}  kernels")
    for s in SHAPES:
        g = torch.Generator("cuda").manual_seed(0)
        q = torch.randn(s.B, s.Hq, 1, s.d, generator=g, device="cuda").bfloat16()
        k = torch.randn(s.B, s.Hkv, s.Nk, s.d, generator=g, device="cuda").bfloat16()
        v = torch.randn(s.B, s.Hkv, s.Nk, s.d, generator=g, device="cuda").bfloat16()
        seqlens = torch.full((s.B,), s.Nk, dtype=torch.int32, device="cuda")
        scale = s.d ** -0.5

        def ours():
            return torch.ops.fa.forward_kvcache(q, k, v, seqlens, None, None, scale, False)

        cudnn, why = sdpa_call(SDPBackend.CUDNN_ATTENTION, q, k, v, scale)
        for name, fn in (("fa", ours), ("cudnn", cudnn)):
            if fn is None:
                print(f"{s.label:24} {name:6} n/a: {why}")
                continue
            ev = time_events(fn, flush)
            ahead = time_events(fn, flush, ahead=True)
            try:
                gr = f"{time_graph(fn, flush):7.1f}"
            except Exception as e:                  # noqa: BLE001 - a backend that cannot be captured
                gr, why_graph = "    n/a", str(e).splitlines()[0][:60]
                print(f"  graph capture failed for {name}: {why_graph}")
            busy, span, n, names = kernel_times(fn, flush)
            host = host_time(fn)
            print(f"{s.label:24} {name:6} {ev:7.1f} {ahead:7.1f} {gr} {busy:7.1f} {span:7.1f} {host:6.1f}  "
                  f"{n} calls: {'; '.join(names)}")
        runs = [("combine", {"decode_cluster": "off"})]
        runs += [(f"fa/{sp}", {"decode_splits": sp}) for sp in splits]
        for label, fields in runs:
            with overrides(**fields):
                ev = time_events(ours, flush)
                busy, span, n, names = kernel_times(ours, flush)
            print(f"{s.label:24} {label:6} {ev:7.1f} {'':7} {'':7} {busy:7.1f} {span:7.1f} {'':6}  "
                  f"{'; '.join(names)}")


if __name__ == "__main__":
    main()
