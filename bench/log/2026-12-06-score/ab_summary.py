"""Medians of score_ab.py's JSON lines per point and label, and each label's ratio to the first.
    python3 ab_summary.py ab.jsonl BASE OTHER..."""
import json
import statistics
import sys
from collections import defaultdict

path, labels = sys.argv[1], sys.argv[2:]
t = defaultdict(list)
for line in open(path):
    r = json.loads(line)
    t[(r["family"], r["dtype"], r["d"], r["N"], r["causal"], r["label"])].append(r["tflops"])
points = sorted({k[:5] for k in t}, key=str)
logs = defaultdict(list)
for key in points:
    med = {lb: statistics.median(t[key + (lb,)]) for lb in labels if t.get(key + (lb,))}
    if labels[0] not in med:
        continue
    row = " ".join(f"{lb} {med[lb]:6.1f}" for lb in labels if lb in med)
    rat = " ".join(f"{lb}/{labels[0]} {med[lb] / med[labels[0]]:.3f}" for lb in labels[1:] if lb in med)
    for lb in labels[1:]:
        if lb in med:
            logs[lb].append(med[lb] / med[labels[0]])
    n = min(len(t[key + (lb,)]) for lb in labels if lb in med)
    print(f"{key[0]:4s} {key[1]:8s} d {key[2]:3d} N {key[3]:5d} causal {int(key[4])} | {row} | {rat} (rounds {n})")
for lb, xs in logs.items():
    print(f"{lb}/{labels[0]}: geomean {statistics.geometric_mean(xs):.3f}, {min(xs):.3f}-{max(xs):.3f}")
