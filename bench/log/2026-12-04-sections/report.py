"""bench/results/sections.md from sections.py's output: causal dense calls with this build's tile
order (sections of heads on one CTA per tile) beside head by head (sm90_heads = 1) and FA3 (bf16),
timed call by call in turn.

    python3 report.py sections_call4.jsonl COMMIT > ../../results/sections.md"""
import json
import math
import sys

rows = [json.loads(line) for line in open(sys.argv[1])]
gm = lambda x: math.exp(sum(map(math.log, x)) / len(x))  # noqa: E731
print(f"Causal attention on the H200 ({sys.argv[2]}), FlashAttention's grid (B·N = 16k tokens, H·d = 2048), "
      f"TFLOP/s (4·B·H·N²·d / time, halved), timed call by call in turn: `ours` with its tile order (from "
      f"8k keys one CTA per tile, the tiles in sections of heads walked rank by rank, heaviest first), "
      f"`head by head` the same kernel with `sm90_heads=1` (the order before), `FA3` FlashAttention-3's "
      f"forward (bf16 only). Up to 4k keys the persistent grid walks head by head either way.\n")
print("| dtype | d | N | ours | head by head | FA3 | ours / head by head | ours / FA3 | head by head / FA3 |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    fa3 = f"{r['fa3']:.0f}" if "fa3" in r else "–"
    a = f"{r['auto/fa3']:.3f}×" if "fa3" in r else "–"
    h = f"{r['heads1/fa3']:.3f}×" if "fa3" in r else "–"
    print(f"| {r['dtype']} | {r['d']} | {r['N']} | {r['auto']:.0f} | {r['heads1']:.0f} | {fa3} | "
          f"{r['auto/heads1']:.3f}× | {a} | {h} |")
long = [r for r in rows if r["N"] >= 8192]
bf = [r for r in rows if "fa3" in r]
print(f"\nGeomean, ours / head by head: from 8k keys {gm([r['auto/heads1'] for r in long]):.3f}×, "
      f"up to 4k {gm([r['auto/heads1'] for r in rows if r['N'] <= 4096]):.3f}×. Ours / FA3 (bf16, 12 points): "
      f"{gm([r['auto/fa3'] for r in bf]):.3f}× (head by head {gm([r['heads1/fa3'] for r in bf]):.3f}×); "
      f"from 8k keys {gm([r['auto/fa3'] for r in bf if r['N'] >= 8192]):.3f}× "
      f"(head by head {gm([r['heads1/fa3'] for r in bf if r['N'] >= 8192]):.3f}×).")
