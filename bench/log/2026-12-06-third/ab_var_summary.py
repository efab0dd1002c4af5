"""Medians of tools/ab_variants.py's JSON lines per build ("base", "new"): each point's variant call
and its dense call (the same tensors without the variant: the call's noise floor here, since the
dense kernels are the same code in both builds), new / base, and the per-round ratios.
    python3 bench/log/2026-12-06-third/ab_var_summary.py ab.jsonl
"""
import json, statistics, sys
from collections import defaultdict

t, err = defaultdict(list), defaultdict(float)
for line in open(sys.argv[1]):
    r = json.loads(line)
    for kind in ("tflops", "dense"):
        for name, x in r[kind].items():
            t[(name, kind, r["label"])].append(x)
    for name, e in r["err"].items():
        err[(name, r["label"])] = max(err[(name, r["label"])], e)
names = sorted({k[0] for k in t})
print("| point | base | new | new / base (rounds) | new / base | dense new / base | max |err| base / new |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for n in names:
    b, w = t[(n, "tflops", "base")], t[(n, "tflops", "new")]
    db, dw = t[(n, "dense", "base")], t[(n, "dense", "new")]
    if not b or not w:
        continue
    per = " ".join(f"{y / x:.3f}" for x, y in zip(b, w))
    print(f"| {n} | {statistics.median(b):.1f} | {statistics.median(w):.1f} | {per} | "
          f"{statistics.median(w) / statistics.median(b):.3f} | {statistics.median(dw) / statistics.median(db):.3f} | "
          f"{err[(n, 'base')]:.2e} / {err[(n, 'new')]:.2e} |")
