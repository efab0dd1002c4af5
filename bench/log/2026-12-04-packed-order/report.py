"""The packed-sequence table of bench/results/packed.md: this build (causal calls walked rank by rank
over all heads) beside FlashAttention-3's varlen forward, timed call by call in turn (walks.py of
2026-12-04-packed-dynamic); beside it, the same ratio for the walk head by head (that entry's call 2)
and for main's two tiles per CTA before the counter (its call 1). Ratios of different calls are each
against FA3 in their own call.

    python3 report.py walks_call1.jsonl ../2026-12-04-packed-dynamic/walks_call2.jsonl \
        ../2026-12-04-packed-dynamic/walks_call1.jsonl COMMIT > ../../results/packed.md"""
import json
import math
import sys


def load(path, build=None):
    return {(r["d"], r["lens"], r["causal"]): r for r in map(json.loads, open(path))
            if build is None or r["build"] == build}


new = [json.loads(line) for line in open(sys.argv[1])]
heads, pairs = load(sys.argv[2]), load(sys.argv[3], "base")
print(f"Packed sequences (`attention_varlen`), bf16, H = 16, H200; TFLOP/s over the visible query-key pairs, "
      f"timed call by call in turn with FlashAttention-3's varlen forward ({sys.argv[4]}): a persistent grid "
      f"taking the sequences' query tiles from a counter, each head's tiles together (non-causal) or each "
      f"sequence's tiles rank by rank over all its heads, heaviest first (causal). Earlier calls, each against "
      f"FA3 in its own call: `head by head`, the counter walking causal calls head by head too; `pairs`, two "
      f"tiles of a sequence per CTA before the counter.\n")
print("| d | lengths | causal | ours | FA3 | ours / FA3 | head by head / FA3 | pairs / FA3 |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
cols = {"now": [], "heads": [], "pairs": []}
for r in new:
    key = (r["d"], r["lens"], r["causal"])
    h, p = heads[key]["auto/fa3"], pairs[key]["auto/fa3"]
    cols["now"].append(r["auto/fa3"]), cols["heads"].append(h), cols["pairs"].append(p)
    print(f"| {r['d']} | {r['lens']} | {'yes' if r['causal'] else 'no'} | {r['auto']:.0f} | {r['fa3']:.0f} | "
          f"{r['auto/fa3']:.3f}× | {h:.3f}× | {p:.3f}× |")
gm = lambda x: math.exp(sum(map(math.log, x)) / len(x))  # noqa: E731
causal = [r["causal"] for r in new]
def part(x, c): return gm([v for v, k in zip(x, causal) if k == c])  # noqa: E302
print(f"\nGeomean over the {len(new)} points (non-causal / causal): ours / FA3 {gm(cols['now']):.3f}× "
      f"({part(cols['now'], False):.3f}× / {part(cols['now'], True):.3f}×), head by head {gm(cols['heads']):.3f}× "
      f"({part(cols['heads'], False):.3f}× / {part(cols['heads'], True):.3f}×), pairs {gm(cols['pairs']):.3f}×.")
