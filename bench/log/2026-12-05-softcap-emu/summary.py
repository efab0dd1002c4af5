"""Medians of emu_ab.py's timings per point and library, and each library's ratio to library 0."""
import collections
import json
import statistics
import sys

t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "who" in r:
        t[(r["kind"], r["d"], r["N"], r["causal"])].append((r["who"], r["tflops"]))
for key, rows in t.items():
    med = {w: statistics.median(x for ww, x in rows if ww == w) for w in dict(rows)}
    print(key, " ".join(f"{w} {m:.0f} ({m / med['emu0']:.3f})" for w, m in med.items()))
