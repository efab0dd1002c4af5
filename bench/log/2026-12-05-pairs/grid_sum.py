"""Median TFLOP/s per shape and grid of grid_ab.py's JSON lines, and each grid over the first."""
import json
import statistics
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
shapes = list(dict.fromkeys((r["d"], r["B"], r["N"]) for r in rows))
grids = list(dict.fromkeys(r["grid"] for r in rows))
print("  d  B     N " + "".join(f"{g:>11}" for g in grids) + "".join(f"{g + '/' + grids[0]:>17}" for g in grids[1:])
      + "  bitwise")
for s in shapes:
    med = {g: statistics.median(r["tflops"] for r in rows if (r["d"], r["B"], r["N"]) == s and r["grid"] == g)
           for g in grids}
    same = all(r["bitwise_same"] for r in rows if (r["d"], r["B"], r["N"]) == s)
    print(f"{s[0]:3} {s[1]:2} {s[2]:5} " + "".join(f"{med[g]:11.1f}" for g in grids)
          + "".join(f"{med[g] / med[grids[0]]:17.3f}" for g in grids[1:]) + f"  {same}")
