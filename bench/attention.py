# Attention forward benchmark: torch.ops.fa against PyTorch SDPA (each backend by name) and a naive
# matmul-softmax-matmul, over FlashAttention's standard grid (B·N = 16384 tokens, H·d = 2048).
# For every shape point and provider it records time, TFLOP/s (4·B·Hq·Nq·Nk·d / time, halved when
# causal), peak CUDA memory and the max error against an fp64 reference, then writes
# <out>.json (raw numbers and environment), <out>.md (the table, also printed) and <out>.png, by
# default under bench/out/ (untracked); --out bench/results/<name> writes the committed files.
#
#   python3 -m bench.attention --quick                 # smoke run, seconds        -> bench/out/quick.*
#   python3 -m bench.attention --preset cpu            # 2 CPU cores, a few minutes -> bench/out/cpu.*
#   python3 -m bench.attention --preset gpu            # the full grid on CUDA      -> bench/out/gpu.*
#   python3 -m bench.attention --preset cpu --out bench/results/cpu      # the README's CPU table
#   python3 -m bench.attention --preset gpu --dtype bf16 --d 128 --causal 0 --providers fa sdpa-cudnn
#
# A provider that refuses a point (an SDPA backend rejecting the dtype, out of memory, the op not
# built) is recorded as n/a with its reason. README tables come from the JSON: bench/readme_table.py.
import argparse
import contextlib
import importlib
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import Callable, ContextManager

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench import report

REPO = Path(__file__).resolve().parent.parent
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
REF_ROWS = 256  # the reference is computed on the first and last REF_ROWS query rows only


# ---------------------------------------------------------------------------------------------
# Providers: run(q, k, v, causal, scale) -> out, all tensors (B, H, N, d) on the inputs' device.

@cache
def _fa_ops():
    import torch_flashattn  # noqa: F401  (registers torch.ops.fa)
    return torch.ops.fa


def fa_op(name):
    """Calls torch.ops.fa.<name>(q, k, v, scale=, causal=)."""
    def run(q, k, v, causal, scale):
        return getattr(_fa_ops(), name)(q, k, v, scale=scale, causal=causal)
    return run


def sdpa(q, k, v, causal, scale):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale,
                                          enable_gqa=q.shape[1] != k.shape[1])


def naive(q, k, v, causal, scale):
    """softmax(Q Kᵀ · scale) V with the (B, Hq, Nq, Nk) score matrix materialised."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    s = (q @ k.transpose(-2, -1)).mul_(scale)
    if causal:  # query i sees keys j <= i (top-left, as SDPA)
        s.masked_fill_(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu_(1), -math.inf)
    return torch.softmax(s, dim=-1) @ v


def backend(b):
    return lambda: sdpa_kernel(b)


def peer(module, dtypes):
    """A peer kernel's flash_attn_func (FlashAttention-3's fa3_fwd_interface, FlashAttention-4's
    flash_attn.cute.interface; ../shared/peers/ stages both on the H200), used when importable:
    (B, N, H, d) views of our (B, H, N, d) tensors, no copy; its causal is bottom-right, the same
    as top-left for Nq = Nk (a point with Nq != Nk is refused)."""
    def run(q, k, v, causal, scale):
        f = importlib.import_module(module).flash_attn_func
        if q.dtype not in dtypes:
            raise TypeError(f"{module} takes {', '.join(map(str, dtypes))} only")
        if causal and q.shape[2] != k.shape[2]:
            raise ValueError(f"{module}'s causal mask is bottom-right")
        out = f(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), softmax_scale=scale, causal=causal)
        return (out[0] if isinstance(out, tuple) else out).transpose(1, 2)
    return run


def forced(family):
    """A context that forces one CUDA kernel family around each call (torch_flashattn._testing)."""
    def context():
        from torch_flashattn._testing import overrides
        return overrides(family=family)
    return context


@dataclass(frozen=True)
class Provider:
    run: Callable
    note: str
    devices: tuple = ("cpu", "cuda")
    context: Callable[[], ContextManager] = contextlib.nullcontext  # entered around every call


# Names starting with "fa" are ours; with "sdpa", the baselines the ratio columns compare against.
# Each CUDA kernel family forced (overrides(family=...), what FA_KERNEL sets for a whole process)
# is a provider of its own ("fa-sm80", "fa-simt").
PROVIDERS = {
    "fa": Provider(fa_op("forward"), "torch.ops.fa.forward"),
    "fa-sm90": Provider(fa_op("forward"), "torch.ops.fa.forward, FA_KERNEL=sm90", ("cuda",), forced("sm90")),
    "fa-sm80": Provider(fa_op("forward"), "torch.ops.fa.forward, FA_KERNEL=sm80", ("cuda",), forced("sm80")),
    "fa-fp32": Provider(fa_op("forward"), "torch.ops.fa.forward, FA_KERNEL=fp32", ("cuda",), forced("fp32")),
    "fa-simt": Provider(fa_op("forward"), "torch.ops.fa.forward, FA_KERNEL=simt", ("cuda",), forced("simt")),
    "fa-turing": Provider(fa_op("forward"), "torch.ops.fa.forward, FA_KERNEL=turing (compute_75 PTX, JIT beyond sm_75)",
                          ("cuda",), forced("turing")),
    "sdpa-flash": Provider(sdpa, "SDPA, flash backend (FlashAttention-2)", ("cuda",),
                           backend(SDPBackend.FLASH_ATTENTION)),
    "sdpa-cudnn": Provider(sdpa, "SDPA, cuDNN backend", ("cuda",), backend(SDPBackend.CUDNN_ATTENTION)),
    "sdpa-efficient": Provider(sdpa, "SDPA, memory-efficient backend", ("cuda",),
                               backend(SDPBackend.EFFICIENT_ATTENTION)),
    "sdpa-cpu": Provider(sdpa, "SDPA, flash backend on CPU (the default CPU kernel)", ("cpu",),
                         backend(SDPBackend.FLASH_ATTENTION)),
    "sdpa-math": Provider(sdpa, "SDPA, math backend", context=backend(SDPBackend.MATH)),
    "fa3": Provider(peer("fa3_fwd_interface", (torch.bfloat16,)), "FlashAttention-3's forward (fa3-fwd wheel, "
                    "bf16), optional: used when importable", ("cuda",)),
    "fa4": Provider(peer("flash_attn.cute.interface", (torch.bfloat16, torch.float16)),
                    "FlashAttention-4's CuTe forward (its Hopper kernel on sm_90), optional: used when importable",
                    ("cuda",)),
    "naive": Provider(naive, "torch matmul, softmax, matmul; N×N scores materialised"),
    "naive-cuda": Provider(fa_op("naive_forward"), "torch.ops.fa.naive_forward: three CUDA kernels, "
                           "N×N fp32 scores materialised", ("cuda",)),
}
DEFAULT_PROVIDERS = {
    "cpu": ["fa", "sdpa-cpu", "naive"],
    "cuda": ["fa", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math", "naive-cuda"],
}


# ---------------------------------------------------------------------------------------------
# The grid.

PRESETS = {
    # FlashAttention's grid: B = tokens / N, H = hidden / d; fp32 only for d <= 128.
    "gpu": dict(device="cuda", dtype=["bf16", "fp16", "fp32"], d=[64, 128, 256],
                n=[512, 1024, 2048, 4096, 8192, 16384], causal="both", budget=0.1, fp32_max_d=128),
    # Two CPU cores, a few minutes in all.
    "cpu": dict(device="cpu", dtype=["fp32"], d=[64, 128], n=[1024, 2048, 4096], causal="both",
                batch=1, heads=8, budget=1.0),
    # A smoke run of seconds; dtype fp32 on CPU, bf16 on CUDA.
    "quick": dict(d=[64], n=[256, 1024], causal="both", batch=1, heads=4, budget=0.2),
}


@dataclass(frozen=True)
class Point:
    dtype: str
    d: int
    causal: bool
    B: int
    Hq: int
    Hkv: int
    N: int

    @property
    def flops(self):
        return 4 * self.B * self.Hq * self.N * self.N * self.d * (0.5 if self.causal else 1.0)

    @property
    def label(self):
        return (f"{self.dtype} d={self.d} causal={int(self.causal)} "
                f"B={self.B} H={self.Hq}/{self.Hkv} N={self.N}")


def grid(cfg):
    points = []
    for dtype in cfg.dtype:
        for d in cfg.d:
            if dtype == "fp32" and cfg.fp32_max_d and d > cfg.fp32_max_d:
                continue
            for causal in {"0": [False], "1": [True], "both": [False, True]}[cfg.causal]:
                for n in cfg.n:
                    B = cfg.batch or cfg.tokens // n
                    Hq = cfg.heads or cfg.hidden // d
                    points.append(Point(dtype, d, causal, B, Hq, Hq // cfg.gqa, n))
    return points


# ---------------------------------------------------------------------------------------------
# Measurement.

def inputs(p, device):
    g = torch.Generator(device).manual_seed(0)
    shapes = [(p.B, p.Hq, p.N, p.d), (p.B, p.Hkv, p.N, p.d), (p.B, p.Hkv, p.N, p.d)]
    return [torch.randn(s, generator=g, device=device).to(DTYPES[p.dtype]) for s in shapes]


def reference_rows(n, device):
    if n <= 2 * REF_ROWS:
        return torch.arange(n, device=device)
    return torch.cat([torch.arange(REF_ROWS, device=device), torch.arange(n - REF_ROWS, n, device=device)])


def reference(q, k, v, rows, causal, scale):
    """SDPA math on fp64 copies, for the query rows `rows` only: (B, Hq, len(rows), d)."""
    # rows are not a prefix, so causality is an explicit mask: query row i sees keys j <= i
    mask = torch.arange(k.shape[2], device=k.device) <= rows[:, None] if causal else None
    out = []
    with sdpa_kernel(SDPBackend.MATH):
        for b in range(q.shape[0]):  # one batch at a time keeps the fp64 scores small
            out.append(F.scaled_dot_product_attention(
                q[b:b + 1, :, rows].double(), k[b:b + 1].double(), v[b:b + 1].double(),
                attn_mask=mask, scale=scale, enable_gqa=q.shape[1] != k.shape[1]))
    return torch.cat(out)


def probe(call):
    """The first call: (output, None), or (None, why the provider refused)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return call(), None
        except Exception as e:  # noqa: BLE001  any refusal becomes an n/a cell with its reason
            if isinstance(e, torch.OutOfMemoryError):
                torch.cuda.empty_cache()
            # SDPA explains a refused backend in warnings; keep the lines that give a reason
            reasons = []
            for w in caught:
                text = " ".join(str(w.message).split("(Triggered internally at")[0].split())
                if text and not text.endswith("because:") and "runtime disabled" not in text \
                        and text not in reasons:
                    reasons.append(text)
            return None, "; ".join(reasons) or f"{type(e).__name__}: {' '.join(str(e).split())}"


def time_cpu(fn, budget_s):
    """Median ms of >= 3 calls after one warm-up, repeating until budget_s is spent."""
    fn()
    times = []
    while len(times) < 3 or (sum(times) < budget_s and len(times) < 100):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def time_cuda_events(fn, budget_s, flush_mode="zero"):
    """Median ms over CUDA events, L2 flushed before each call: by writing 256 MB of zeros (what
    do_bench does; the dirty lines it leaves in L2 are written back during the timed call), or with
    flush_mode="read" by reading 256 MB (L2 left holding clean lines)."""
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    if flush_mode == "read":
        flush = flush.view(torch.float32).zero_()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        fn()
    end.record()
    torch.cuda.synchronize()
    reps = max(10, min(1000, int(budget_s * 1e3 / max(start.elapsed_time(end) / 5, 1e-3))))
    events = [[torch.cuda.Event(enable_timing=True) for _ in range(2)] for _ in range(reps)]
    for e0, e1 in events:
        if flush_mode == "read":
            flush.amax()
        else:
            flush.zero_()
        e0.record()
        fn()
        e1.record()
    torch.cuda.synchronize()
    return statistics.median(e0.elapsed_time(e1) for e0, e1 in events)


def time_interleaved(fns, budget_s, flush_mode="zero"):
    """Median ms of each of fns, timed call by call in turn (the order rotating every round) so
    that clock and temperature drift fall on all of them alike; L2 flushed before every call as in
    time_cuda_events. Between the flush and the start event the GPU spins for ~0.1 ms
    (torch.cuda._sleep), so the host has queued the call before its start event is reached: the
    time is the GPU's, not the host's launch cost (SDPA's cuDNN decode call takes 55-58 µs of host
    time on the H200 machine, bench/log/2026-11-30-decode-gap-pdl/decode_gap.txt).
    budget_s: seconds of timed calls for each fn."""
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    if flush_mode == "read":
        flush = flush.view(torch.float32).zero_()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for fn in fns:
        for _ in range(5):
            fn()
    end.record()
    torch.cuda.synchronize()
    per_call = max(start.elapsed_time(end) / (5 * len(fns)), 1e-3)
    reps = max(10, min(1000, int(budget_s * 1e3 / per_call)))
    events = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in fns]
              for _ in range(reps)]
    for r, row in enumerate(events):
        for j in range(len(fns)):
            c = (j + r) % len(fns)
            if flush_mode == "read":
                flush.amax()
            else:
                flush.zero_()
            torch.cuda._sleep(200_000)
            row[c][0].record()
            fns[c]()
            row[c][1].record()
    torch.cuda.synchronize()
    return [statistics.median(row[c][0].elapsed_time(row[c][1]) for row in events) for c in range(len(fns))]


def make_timer(device, flush_mode="zero"):
    """(timer(fn, budget_s) -> median ms, description). flush_mode="read": CUDA events with a
    read-only L2 flush (time_cuda_events) instead of do_bench's zero fill."""
    if device == "cpu":
        return time_cpu, "time.perf_counter, 1 warm-up, median of >= 3 calls / budget"
    if flush_mode == "read":
        return (lambda fn, budget_s: time_cuda_events(fn, budget_s, "read"),
                "CUDA events, 5 warm-up, median of >= 10 calls / budget, L2 flushed by reading 256 MB")
    try:
        from triton.testing import do_bench
    except ImportError:
        return time_cuda_events, "CUDA events, 5 warm-up, median of >= 10 calls / budget, L2 flushed"
    return (lambda fn, budget_s: do_bench(fn, warmup=25, rep=budget_s * 1e3, return_mode="median"),
            "triton.testing.do_bench, median, L2 flushed")


def measure(point, names, device, timer, budget_s, in_turn=False):
    """Each provider's error against the reference, its peak memory and its time: each timed on its
    own by timer, or (in_turn, CUDA) all of the point's providers timed call by call in turn
    (time_interleaved), so that they run under the same recent load of the card."""
    q, k, v = inputs(point, device)
    scale = point.d ** -0.5
    rows = reference_rows(point.N, device)
    ref = reference(q, k, v, rows, point.causal, scale)
    cuda = device == "cuda"
    results, ready = {}, {}
    for name in names:
        provider = PROVIDERS[name]

        def call(provider=provider):
            return provider.run(q, k, v, point.causal, scale)

        def call_in_context(provider=provider, call=call):
            with provider.context():
                return call()

        with provider.context():
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                live = torch.cuda.memory_allocated()  # the inputs and the reference
            out, reason = probe(call)
            if out is None:
                results[name] = {"na": reason}
                continue
            r = {"max_err": (out[:, :, rows].double() - ref).abs().max().item()}
            if cuda:
                r["peak_mem_mb"] = (torch.cuda.max_memory_allocated() - live) / 2**20
            del out
            if in_turn:
                ready[name] = call_in_context
            else:
                r["ms"] = timer(call, budget_s)
        results[name] = r
    if ready:
        for name, ms in zip(ready, time_interleaved(list(ready.values()), budget_s)):
            results[name]["ms"] = ms
    for r in results.values():
        if "ms" in r:
            r["tflops"] = point.flops / r["ms"] / 1e9

    # FlashAttention's rule: our error over PyTorch's same-dtype error, here the best SDPA backend's
    sdpa_errs = {n: r["max_err"] for n, r in results.items()
                 if n.startswith("sdpa") and math.isfinite(r.get("max_err", math.nan))}
    if sdpa_errs:
        best = min(sdpa_errs, key=sdpa_errs.get)
        mine = report.ours(results)
        for n, r in results.items():
            if n in mine and "max_err" in r and sdpa_errs[best] > 0:
                r["err_ratio"], r["err_ratio_vs"] = r["max_err"] / sdpa_errs[best], best
    return results


# ---------------------------------------------------------------------------------------------
# Environment and the run.

def require_cuda(prog, hint=""):
    """Ends a GPU-only benchmark with a message when this machine has no CUDA device."""
    if not torch.cuda.is_available():
        raise SystemExit(f"{prog}: needs a CUDA GPU; torch sees none here{' ' + hint if hint else ''}")


def git_commit():
    """The commit of the sources that ran: FA_GIT_COMMIT where set (a copy of the working tree whose
    .git lags behind it, as on a lent GPU machine), else HEAD, with "-dirty" for uncommitted changes."""
    if os.environ.get("FA_GIT_COMMIT"):
        return os.environ["FA_GIT_COMMIT"]
    try:
        def git(*a):
            return subprocess.run(["git", "--no-optional-locks", *a], cwd=REPO, capture_output=True,
                                  text=True, check=True).stdout.strip()
        sha = git("rev-parse", "HEAD")
        return sha + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def write_rows(out, text, rows, device="cuda"):
    """Prints a benchmark's markdown table and writes <out>.md and <out>.json (environment, commit,
    rows): the small benchmarks' results."""
    print(text)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(dict(environment=environment(device), commit=git_commit(),
                                                        rows=rows), indent=1))
    out.with_suffix(".md").write_text(text)


def environment(device):
    info = {"torch": torch.__version__, "python": platform.python_version(),
            "torch_threads": torch.get_num_threads(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
            "FA_KERNEL": os.environ.get("FA_KERNEL")}
    if device == "cuda":
        info.update(device=torch.cuda.get_device_name(), cuda=torch.version.cuda,
                    cudnn=torch.backends.cudnn.version())
        with contextlib.suppress(ImportError):
            import triton
            info["triton"] = triton.__version__
    else:
        with contextlib.suppress(OSError):
            with open("/proc/cpuinfo") as f:
                models = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
            info["cpu"] = models[0] if models else platform.processor()
        info["device"] = f"CPU ({info.get('cpu') or platform.machine()}, threads: {torch.get_num_threads()})"
    return info


def progress(points):
    """(iterator over points, print for result lines): tqdm if installed, else a line per point."""
    try:
        from tqdm import tqdm
    except ImportError:
        def lines():
            for i, p in enumerate(points, 1):
                print(f"[{i}/{len(points)}] {p.label}", file=sys.stderr, flush=True)
                yield p
        return lines(), print
    return tqdm(points, unit="point", dynamic_ncols=True), tqdm.write


def parse_n(text):
    return int(text[:-1]) * 1024 if text.lower().endswith("k") else int(text)


def parse_args(argv):
    notes = "\n".join(f"  {n:15} {p.note} ({', '.join(p.devices)})" for n, p in PROVIDERS.items())
    ap = argparse.ArgumentParser(prog="python3 -m bench.attention",
                                 description="Time attention forward providers over a shape grid.",
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=f"providers:\n{notes}")
    ap.add_argument("--preset", choices=PRESETS, help="grid and device defaults (default: by device)")
    ap.add_argument("--quick", action="store_const", dest="preset", const="quick", help="= --preset quick")
    ap.add_argument("--device", choices=["cpu", "cuda"])
    ap.add_argument("--providers", nargs="+", choices=PROVIDERS, help="default: by device")
    ap.add_argument("--dtype", nargs="+", choices=DTYPES)
    ap.add_argument("--d", nargs="+", type=int, help="head dims")
    ap.add_argument("--n", nargs="+", type=parse_n, help="sequence lengths, e.g. 512 1k 16k")
    ap.add_argument("--causal", choices=["0", "1", "both"])
    ap.add_argument("--tokens", type=int, default=16384, help="B·N when --batch is not given")
    ap.add_argument("--hidden", type=int, default=2048, help="H·d when --heads is not given")
    ap.add_argument("--batch", type=int, help="fixed B instead of tokens / N")
    ap.add_argument("--heads", type=int, help="fixed query heads instead of hidden / d")
    ap.add_argument("--gqa", type=int, default=1, help="query heads per KV head")
    ap.add_argument("--budget", type=float, help="seconds of timed calls per provider and point")
    ap.add_argument("--threads", type=int, help="CPU threads, torch.set_num_threads (default: torch's)")
    ap.add_argument("--in-turn", action="store_true",
                    help="CUDA: time a point's providers call by call in turn (time_interleaved), not each "
                         "on its own with do_bench")
    ap.add_argument("--out", help="output path without suffix (default bench/out/<preset>; "
                    "bench/results/<name> for the committed files)")
    args = ap.parse_args(argv)

    if args.preset is None:
        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        args.preset = "gpu" if device == "cuda" else "cpu"
    preset = PRESETS[args.preset]
    explicit = args.dtype or args.d
    for key, value in preset.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    # fp32 is left out at large d by the preset only: an explicit dtype or d list is taken as it is
    args.fp32_max_d = None if explicit else preset.get("fp32_max_d")
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    args.dtype = args.dtype or (["fp32"] if args.device == "cpu" else ["bf16"])
    args.providers = args.providers or DEFAULT_PROVIDERS[args.device]
    args.out = Path(args.out or f"bench/out/{args.preset}")
    if args.out.suffix == ".json":
        args.out = args.out.with_suffix("")

    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device")
    if args.in_turn and args.device != "cuda":
        ap.error("--in-turn: CUDA only (the CPU timer runs one call at a time)")
    check_providers(ap, args.providers, args.device, PROVIDERS)
    for n in args.n:
        if not args.batch and args.tokens % n:
            ap.error(f"--tokens {args.tokens} is not a multiple of N={n}; give --batch")
    for d in args.d:
        heads = args.heads or args.hidden // d
        if not args.heads and args.hidden % d or heads % args.gqa:
            ap.error(f"d={d}: hidden / d or heads not divisible (give --heads, check --gqa)")
    return args


def check_providers(ap, names, device, providers):
    """ap.error unless every provider named runs on the device (providers: name -> .devices)."""
    for name in names:
        if device not in providers[name].devices:
            ap.error(f"provider {name} runs on {', '.join(providers[name].devices)} only")


def parsed(parse_args, argv):
    """parse_args(argv), with torch's CPU threads set from --threads."""
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parsed(parse_args, argv)
    points = grid(args)
    timer, timer_note = make_timer(args.device)
    result = {
        "name": args.out.name,
        "command": shlex.join(["python3", "-m", "bench.attention", *argv]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        **environment(args.device),
        "timer": (f"CUDA events, a point's providers call by call in turn, L2 flushed before each call "
                  f"({args.budget:g} s each)" if args.in_turn else f"{timer_note} ({args.budget:g} s)"),
        "reference": f"SDPA math on fp64 inputs, first and last {REF_ROWS} query rows "
                     f"(all when N <= {2 * REF_ROWS})",
        "providers": args.providers,
        "provider_notes": {n: PROVIDERS[n].note for n in args.providers},
        "points": [],
    }

    bar, say = progress(points)
    for point in bar:
        results = measure(point, args.providers, args.device, timer, args.budget, args.in_turn)
        if args.device == "cuda":
            torch.cuda.empty_cache()  # the naive provider's N×N blocks would otherwise stay reserved
        result["points"].append({**asdict(point), "flops": point.flops, "results": results})
        say(point.label + "  " + "  ".join(
            f"{n} {r['tflops']:.3g}" if "tflops" in r else f"{n} n/a" for n, r in results.items()))

    args.out.parent.mkdir(parents=True, exist_ok=True)
    base = str(args.out)
    Path(base + ".json").write_text(json.dumps(result, indent=1) + "\n")
    table = report.markdown(result)
    Path(base + ".md").write_text(table)
    written = [base + ".json", base + ".md"]
    if report.plot(result, base + ".png"):
        written.append(base + ".png")
    print("\n" + table)
    print("wrote " + ", ".join(written))


if __name__ == "__main__":
    main()
