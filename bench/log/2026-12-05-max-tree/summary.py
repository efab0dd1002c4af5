"""Medians of tree_ab.py's timings per point, and the tree's ratio to the chain."""
import collections
import json
import statistics
import sys

t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "who" in r:
        t[(r["d"], r["N"], r["causal"], r["softcap"])].append((r["who"], r["tflops"]))
ratios = []
for key, rows in t.items():
    med = {w: statistics.median(x for ww, x in rows if ww == w) for w in dict(rows)}
    ratios.append(med["tree1"] / med["tree0"])
    print("d %3d N %5d causal %d softcap %4.0f  chain %6.1f  tree %6.1f  tree/chain %.3f"
          % (*key, med["tree0"], med["tree1"], ratios[-1]))
print("geomean tree/chain %.4f" % statistics.geometric_mean(ratios))
