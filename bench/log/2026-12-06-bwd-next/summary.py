"""ab.py's JSON lines as a table: per point the median over rounds of each provider's TFLOP/s,
split / joint and joint / cuDNN, split / cuDNN; then the geomean of split / joint.

    python3 bench/log/2026-12-06-bwd-next/summary.py ab.jsonl
"""
import collections
import json
import math
import statistics
import sys

rows = collections.defaultdict(lambda: collections.defaultdict(list))
bad = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    key = (r["dtype"], r["d"], r["causal"], r["N"])
    if "check" in r:
        if not r["ok"]:
            bad.append(key)
        continue
    rows[key][r["who"]].append(r["tflops"])
print("| dtype | d | causal | N | joint | split | cuDNN | split / joint | joint / cuDNN | split / cuDNN |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
ratios = []
for key in sorted(rows):
    m = {w: statistics.median(v) for w, v in rows[key].items()}
    j, s, c = m.get("joint"), m.get("split"), m.get("sdpa-cudnn")
    ratios.append(s / j)
    print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {j:.1f} | {s:.1f} | {c:.1f} | {s / j:.3f} | {j / c:.3f} | {s / c:.3f} |")
if ratios:
    print(f"\ngeomean split / joint over {len(ratios)} points: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.4f}")
print("dK / dV bits differ at:", bad if bad else "none")
