"""Median TFLOP/s per point and entry point of ab.py's JSON lines, and lib / op, var / op."""
import json
import statistics
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
points = sorted({(r["d"], r["causal"], r["N"]) for r in rows})
print("d causal     N        op       lib       var   lib/op   var/op  bitwise")
for pt in points:
    med = {w: statistics.median(r["tflops"] for r in rows if (r["d"], r["causal"], r["N"]) == pt and r["who"] == w)
           for w in ("op", "lib", "var")}
    same = all(r["bitwise_same"] for r in rows if (r["d"], r["causal"], r["N"]) == pt)
    print(f"{pt[0]:3} {int(pt[1]):6} {pt[2]:5} {med['op']:9.1f} {med['lib']:9.1f} {med['var']:9.1f} "
          f"{med['lib'] / med['op']:8.3f} {med['var'] / med['op']:8.3f}  {same}")
