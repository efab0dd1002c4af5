# Where the decode attend kernel's time goes, per CTA. Needs the extension built with
# -DFA_DECODE_TRACE (FA_DECODE_TRACE=1 at build time, setup.py): then each CTA's thread 0 prints globaltimer at entry and exit and
# clock64 offsets from entry at: Q tile visible (c1), warp 0's first K/V block landed (c2), warp
# 0's key loop done (c3), all warps' partials visible (c4), exit after stores / cluster merge (c5). For the last of
# --calls calls (L2 flushed by a 256 MB read before each), prints the spread of CTA start and end
# times and the median per-CTA phase durations in µs.
#
# bf16, d = 128, one query token, GPU.md's decode shapes; the kernel's choices (split count,
# cluster size) as the automatic rule makes them, or as --set forces them (override fields, e.g.
# --set decode_splits=32 decode_cluster=off).
#
#   FA_DECODE_TRACE=1 python3 setup.py build_ext --inplace    # on the GPU machine
#   python3 -m tools.decode_trace > bench/out/decode_trace.txt
#   python3 -m tools.decode_trace --per-sm --calls 12 --shape 1,32,32,32768 32,32,8,4096 1,32,8,131072
#
# --per-sm: for each of the last 8 calls the spread of warp 0's key-loop time over the CTAs, then
# per SM: whether the same SM is fast or slow from call to call (correlation of its loop times in
# consecutive calls) and the fastest and slowest SMs' mean loop times.
import argparse
import json
import os
import statistics
import subprocess
import sys

SHAPES = [(1, 32, 32, 4096), (8, 32, 8, 8192), (1, 32, 8, 131072), (1, 32, 32, 32768), (32, 32, 8, 4096)]


FIELDS = ("seq", "grid", "cta", "sm", "cluster", "splits", "gt0", "gt5", "c1", "c2", "c3", "c4", "c5")


def run_one(B, Hq, Hkv, N, calls, fields):
    """In a child process: `calls` calls of one shape, each after a 256 MB read that flushes L2."""
    import torch
    import torch_flashattn  # noqa: F401
    from torch_flashattn._testing import overrides
    torch.manual_seed(0)
    q = torch.randn(B, Hq, 1, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(B, Hkv, N, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    with overrides(**fields):
        for _ in range(calls):
            flush.sum(dtype=torch.int64)
            torch.ops.fa.forward_kvcache(q, k, v, None, None, None, None, False)
            torch.cuda.synchronize()


def pct(xs, f):
    return xs[min(len(xs) - 1, int(f * len(xs)))]


def trace_rows(lines, label):
    """The kernel's TRACE lines as dicts, in the order the CTAs finished."""
    rows = sorted((dict(zip(FIELDS, map(int, l.split()[1:]))) for l in lines if l.startswith("TRACE ")),
                  key=lambda r: r["seq"])
    if not rows:
        print(label, "no trace lines (built without FA_DECODE_TRACE=1?)")
    return rows


def analyse(lines, label):
    """The last call's CTAs (the grid's worth with the highest sequence numbers)."""
    rows = trace_rows(lines, label)
    if not rows:
        return
    last = rows[-rows[0]["grid"]:]
    t0 = min(r["gt0"] for r in last)
    starts = sorted((r["gt0"] - t0) / 1e3 for r in last)
    ends = sorted((r["gt5"] - t0) / 1e3 for r in last)
    ghz = statistics.median(r["c5"] / max(1, r["gt5"] - r["gt0"]) for r in last)   # clock64 per ns

    def phase(key):
        return statistics.median(r[key] / ghz / 1e3 for r in last)

    loop = sorted((r["c3"] - r["c2"]) / ghz / 1e3 for r in last)
    print(f"{label}: grid {len(last)} CTAs, cluster {last[0]['cluster']}, splits {last[0]['splits']}, "
          f"SM clock {ghz:.2f} GHz (clock64 / globaltimer)")
    print(f"  start after first CTA, µs: min {starts[0]:.2f} p50 {pct(starts, .5):.2f} p90 {pct(starts, .9):.2f} max {starts[-1]:.2f}")
    print(f"  end after first start, µs: min {ends[0]:.2f} p50 {pct(ends, .5):.2f} p90 {pct(ends, .9):.2f} max {ends[-1]:.2f}")
    print(f"  per CTA, median µs from its start: Q visible {phase('c1'):.2f}, first K/V block {phase('c2'):.2f}, "
          f"loop done (warp 0) {phase('c3'):.2f}, partials visible {phase('c4'):.2f}, exit {phase('c5'):.2f}")
    print(f"  warp 0 loop (first block landed .. done), µs: min {loop[0]:.2f} p50 {pct(loop, .5):.2f} max {loop[-1]:.2f}")
    print(f"  distinct SMs {len(set(r['sm'] for r in last))}")


def corr(x, y):
    mx, my = statistics.mean(x), statistics.mean(y)
    sx, sy = sum((a - mx) ** 2 for a in x) ** .5, sum((b - my) ** 2 for b in y) ** .5
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / (sx * sy) if sx and sy else float("nan")


def per_sm(lines, label):
    """Is a CTA's key-loop time a property of the SM it ran on? The last 8 calls."""
    rows = trace_rows(lines, label)
    if not rows:
        return
    grid = rows[0]["grid"]
    calls = [rows[i:i + grid] for i in range(0, len(rows), grid)][-8:]
    print(f"== {label}: grid {grid}, cluster {rows[0]['cluster']}, splits {rows[0]['splits']}, {len(calls)} calls")
    times, ctas = {}, {}                                # sm -> [(call, loop µs)], cta -> {sm}
    for k, c in enumerate(calls):
        t0 = min(r["gt0"] for r in c)
        ghz = statistics.median(r["c5"] / max(1, r["gt5"] - r["gt0"]) for r in c)
        loops = [(r["c3"] - r["c2"]) / ghz / 1e3 for r in c]
        srt, ends = sorted(loops), sorted((r["gt5"] - t0) / 1e3 for r in c)
        print(f"  call {k}: loop min {srt[0]:.1f} p10 {pct(srt, .1):.1f} p50 {statistics.median(srt):.1f} "
              f"max {srt[-1]:.1f}; end p50 {pct(ends, .5):.1f} max {ends[-1]:.1f} µs")
        for r, lp in zip(c, loops):
            times.setdefault(r["sm"], []).append((k, lp))
            ctas.setdefault(r["cta"], set()).add(r["sm"])
    # an SM's time in call k: its first CTA's (two CTAs on one SM run side by side)
    vs = [[next((lp for kk, lp in times[sm] if kk == k), None) for sm in sorted(times)] for k in range(len(calls))]
    ok = [i for i in range(len(times)) if all(v[i] is not None for v in vs)]
    cs = [corr([vs[k][i] for i in ok], [vs[k + 1][i] for i in ok]) if len(ok) > 1 else float("nan")
          for k in range(len(calls) - 1)]
    print("  per-SM loop time, correlation between consecutive calls (same SM): " + " ".join(f"{c:.2f}" for c in cs))
    means = sorted((statistics.mean(lp for _, lp in t), statistics.pstdev([lp for _, lp in t]), sm)
                   for sm, t in times.items())
    print("  fastest SMs (mean, sd over calls, sm): " + ", ".join(f"{m:.1f}±{d:.1f} sm{sm}" for m, d, sm in means[:10]))
    print("  slowest SMs: " + ", ".join(f"{m:.1f}±{d:.1f} sm{sm}" for m, d, sm in means[-10:]))
    print(f"  CTAs that ran on the same SM in every call: {sum(len(v) == 1 for v in ctas.values())} of {len(ctas)}")


def main():
    ap = argparse.ArgumentParser(prog="python3 -m tools.decode_trace",
                                 description="per-CTA phase times of the decode attend kernel (a trace build)")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--one", nargs=4, type=int, help=argparse.SUPPRESS)
    ap.add_argument("--fields", default="{}", help=argparse.SUPPRESS)
    ap.add_argument("--set", nargs="+", default=[], metavar="FIELD=value",
                    help="overrides for every call, e.g. decode_splits=32")
    ap.add_argument("--per-sm", action="store_true", help="per-SM loop times over the last 8 calls")
    ap.add_argument("--shape", nargs="+", metavar="B,Hq,Hkv,Nk", help="shapes instead of the five above")
    args = ap.parse_args()
    if args.one:
        run_one(*args.one, args.calls, json.loads(args.fields))
        return
    fields = {kv.split("=", 1)[0]: int(v) if (v := kv.split("=", 1)[1]).isdigit() else v for kv in args.set}
    shapes = [tuple(int(x) for x in t.split(",")) for t in args.shape] if args.shape else SHAPES
    for B, Hq, Hkv, N in shapes:
        out = subprocess.run([sys.executable, "-m", "tools.decode_trace", "--calls", str(args.calls), "--one",
                              str(B), str(Hq), str(Hkv), str(N), "--fields", json.dumps(fields)],
                             capture_output=True, text=True, env=os.environ)
        (per_sm if args.per_sm else analyse)(out.stdout.splitlines(), f"B={B} H={Hq}/{Hkv} N={N}" if args.per_sm
                                             else f"B={B} H={Hq}/{Hkv} Nk={N}")
        if out.returncode != 0:
            print(out.stderr[-2000:])


if __name__ == "__main__":
    main()
