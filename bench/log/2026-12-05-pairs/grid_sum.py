"""Median TFLOP/s per shape and grid of grid_ab.py's JSON lines, and each grid over "tile"."""
import json
import statistics
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
shapes = list(dict.fromkeys((r["d"], r["B"], r["N"]) for r in rows))
print("  d  B     N      tile persistent    pairs  pers/tile pairs/tile pairs/pers  bitwise")
for s in shapes:
    med = {g: statistics.median(r["tflops"] for r in rows if (r["d"], r["B"], r["N"]) == s and r["grid"] == g)
           for g in ("tile", "persistent", "pairs")}
    same = all(r["bitwise_same"] for r in rows if (r["d"], r["B"], r["N"]) == s)
    print(f"{s[0]:3} {s[1]:2} {s[2]:5} {med['tile']:9.1f} {med['persistent']:10.1f} {med['pairs']:8.1f} "
          f"{med['persistent'] / med['tile']:10.3f} {med['pairs'] / med['tile']:10.3f} "
          f"{med['pairs'] / med['persistent']:10.3f}  {same}")
