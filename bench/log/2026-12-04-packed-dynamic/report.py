"""The packed-sequence table of bench/results/packed.md from walks.py's output: this build's walks
beside FlashAttention-3's varlen forward (same call), and main's two tiles per CTA against FA3 in
call 1 (its own process, FA3 in turn there too).

    python3 report.py walks_call2.jsonl walks_call1.jsonl COMMIT > ../../results/packed.md"""
import json
import math
import sys

new = [json.loads(line) for line in open(sys.argv[1])]
old = {(r["d"], r["lens"], r["causal"]): r for r in map(json.loads, open(sys.argv[2])) if r["build"] == "base"}
print(f"Packed sequences (`attention_varlen`), bf16, H = 16, H200; TFLOP/s over the visible query-key pairs, "
      f"timed call by call in turn with FlashAttention-3's varlen forward ({sys.argv[3]}). Our walks: `counter` "
      f"(the default: a persistent grid taking the sequences' query tiles from a counter), `static` (every "
      f"grid-th tile, `sm90_grid=\"persistent\"`), `one per CTA` (`sm90_grid=\"tile\"`). `pairs / FA3`: the "
      f"kernel before, two tiles of a sequence per CTA, against FA3 in an earlier call of the same session.\n")
print("| d | lengths | causal | counter | static | one per CTA | FA3 | counter / FA3 | pairs / FA3 |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
ratios, before = [], []
for r in new:
    o = old[(r["d"], r["lens"], r["causal"])]
    ratios.append(r["auto/fa3"])
    before.append(o["auto/fa3"])
    print(f"| {r['d']} | {r['lens']} | {'yes' if r['causal'] else 'no'} | {r['auto']:.0f} | {r['persistent']:.0f} | "
          f"{r['tile']:.0f} | {r['fa3']:.0f} | {r['auto/fa3']:.3f}× | {o['auto/fa3']:.3f}× |")
gm = lambda x: math.exp(sum(map(math.log, x)) / len(x))  # noqa: E731
print(f"\nGeomean over the {len(ratios)} points: counter / FA3 {gm(ratios):.3f}×, pairs / FA3 {gm(before):.3f}×.")
