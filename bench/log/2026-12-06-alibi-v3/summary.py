"""Medians over ratio.py's rounds: per build and point, each variant's TFLOP/s over the dense
kernel's, then new / base for each provider; the checks' largest errors.

    python3 bench/log/2026-12-06-alibi-v3/summary.py ratio.jsonl
"""
import json
import statistics
import sys
from collections import defaultdict

t = defaultdict(list)
worst = defaultdict(float)
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "check" in r:
        worst[(r["label"], r["check"])] = max(worst[(r["label"], r["check"])], r["max_err"])
    elif "who" in r:
        t[(r["label"], r["dtype"], r["d"], r["N"], r["causal"], r["who"])].append(r["tflops"])
print("largest error against the exact path:", {f"{a}/{b}": round(e, 4) for (a, b), e in worst.items()})
labels = sorted({k[0] for k in t})
points = sorted({k[1:5] for k in t}, key=lambda p: (p[0], p[1], p[2], p[3]))
for p in points:
    row = []
    med = {}
    for lab in labels:
        for who in ("dense", "sinks", "alibi", "alibi_var", "softcap"):
            xs = t.get((lab,) + p + (who,))
            if xs:
                med[(lab, who)] = statistics.median(xs)
    for lab in labels:
        if (lab, "dense") in med:
            row.append("%s dense %5.1f" % (lab, med[(lab, "dense")]) + "".join(
                " %s %.3f" % (who, med[(lab, who)] / med[(lab, "dense")])
                for who in ("sinks", "alibi", "alibi_var", "softcap") if (lab, who) in med))
    print("%-8s d %3d N %5d causal %d | %s" % (*p, " | ".join(row)))
