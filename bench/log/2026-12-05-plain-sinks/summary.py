"""Medians over the rounds of sinks_ab.py's lines: TFLOP/s of each provider, and the ratios
new/old plain, new/old sinks and new sinks / new plain.

    python3 bench/log/2026-12-05-plain-sinks/summary.py sinks_ab.jsonl
"""
import json
import statistics
import sys
from collections import defaultdict

t = defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "who" in r:
        t[(r["dtype"], r["d"], r["N"], r["causal"])].append((r["who"], r["tflops"]))
    elif "check" in r and not r["ok"] or "checks_failed" in r:
        print(r)
for key, rows in t.items():
    med = {w: statistics.median(x for ww, x in rows if ww == w) for w in {w for w, _ in rows}}
    print("%-8s d %3d N %5d causal %d  old plain %5.1f new plain %5.1f  old sinks %5.1f new sinks %5.1f  "
          "plain new/old %.3f  sinks new/old %.3f  new sinks/plain %.3f"
          % (*key, med["old_plain"], med["new_plain"], med["old_sinks"], med["new_sinks"],
             med["new_plain"] / med["old_plain"], med["new_sinks"] / med["old_sinks"],
             med["new_sinks"] / med["new_plain"]))
