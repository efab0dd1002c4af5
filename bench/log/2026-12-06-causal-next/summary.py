"""Medians over ratio.py's rounds: per point, TFLOP/s of "all", "first", "ahead" and FA3, each new
setting over "all" (per round and median) and over FA3; the same-bits checks.

    python3 bench/log/2026-12-06-causal-next/summary.py ratio.jsonl
"""
import json
import statistics
import sys
from collections import defaultdict

t = defaultdict(list)
bad = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("check") == "same_bits":
        if not r["ok"]:
            bad.append((r["dtype"], r["d"], r["N"], r["causal"]))
    elif "who" in r:
        t[(r["dtype"], r["d"], r["N"], r["causal"], r["who"])].append(r["tflops"])
print("same bits:", "all points" if not bad else f"DIFFER at {bad}")
print("| dtype | d | N | causal | all | first | ahead | fa3 | first / all (rounds) | ahead / all (rounds) "
      "| first / all | ahead / all | ahead / fa3 |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
ratios = defaultdict(list)
for p in sorted({k[:4] for k in t}, key=lambda p: (p[0], p[1], p[2], p[3])):
    med = {w: statistics.median(t[p + (w,)]) for w in ("all", "first", "ahead", "fa3") if t.get(p + (w,))}
    per = {w: " ".join(f"{b / a:.3f}" for a, b in zip(t[p + ("all",)], t[p + (w,)])) for w in ("first", "ahead")}
    f3 = f"{med['fa3']:.1f}" if "fa3" in med else "–"
    r3 = f"{med['ahead'] / med['fa3']:.3f}" if "fa3" in med else "–"
    for w in ("first", "ahead"):
        ratios[w].append(med[w] / med["all"])
    print(f"| {p[0]} | {p[1]} | {p[2]} | {p[3]} | {med['all']:.1f} | {med['first']:.1f} | {med['ahead']:.1f} | {f3} "
          f"| {per['first']} | {per['ahead']} | {med['first'] / med['all']:.3f} | {med['ahead'] / med['all']:.3f} | {r3} |")
for w, xs in ratios.items():
    print(f"{w} / all, geomean over the points: {statistics.geometric_mean(xs):.4f}")
