"""bench/results/variants_own_dense.md from ratio.py's runs: for each point, sinks and ALiBi against
our dense kernel on the same tensors (medians over the rounds of each run). Sinks: d6d89ea (variant
kernel) and f22357f (plain tiles' SM90_SINK), H200, 2026-12-06-sinks-alibi calls 2 and 4. ALiBi:
d6d89ea (variant kernel), H100, that folder's call 5; the plain tiles' SM90_ALIBI kernels, H100, this
folder's calls 1 (7f4bffb's kernels), 2 and 3 (the same ALiBi kernels), and in calls 2 and 3, in the
same process, the variant kernel given ALiBi with sinks of −inf (the same problem; ALiBi with sinks
runs there).

    python3 bench/log/2026-12-06-alibi-v3/table.py > bench/results/variants_own_dense.md
"""
import json
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
BEFORE = HERE.parent / "2026-12-06-sinks-alibi"
# (column title, ratio.jsonl, label in it, provider)
COLUMNS = [("sinks, variant kernel (H200)", BEFORE / "call2", "base", "sinks"),
           ("sinks, plain tiles (H200, call 2)", BEFORE / "call2", "new", "sinks"),
           ("sinks, plain tiles (H200, call 4)", BEFORE / "call4", "new", "sinks"),
           ("ALiBi, variant kernel (H100)", BEFORE / "call5", "base", "alibi"),
           ("ALiBi, variant kernel, sinks −inf (H100, call 2)", HERE / "call2", "call2", "alibi_var"),
           ("ALiBi, variant kernel, sinks −inf (H100, call 3)", HERE / "call3", "call3", "alibi_var"),
           ("ALiBi, plain tiles (H100, call 1)", HERE / "call1", "exact", "alibi"),
           ("ALiBi, plain tiles (H100, call 2)", HERE / "call2", "call2", "alibi"),
           ("ALiBi, plain tiles (H100, call 3)", HERE / "call3", "call3", "alibi")]


def medians(path):
    t = defaultdict(list)
    for line in open(path / "ratio.jsonl"):
        r = json.loads(line)
        if "who" in r:
            t[(r["label"], r["dtype"], r["d"], r["N"], r["causal"], r["who"])].append(r["tflops"])
    return {k: statistics.median(v) for k, v in t.items()}


rows = defaultdict(dict)
for title, path, label, who in COLUMNS:
    m = medians(path)
    for (lab, dt, d, n, causal, w), x in m.items():
        if lab == label and w == who:
            rows[(dt, d, n, causal)][title] = x / m[(lab, dt, d, n, causal, "dense")]
print("Sinks and ALiBi against our own dense kernel on the same tensors (TFLOP/s ratio, medians of three "
      "rounds; `bench/log/2026-12-06-alibi-v3/ratio.py`, bf16 unless named, B · N = 16k, H · d = 2048). "
      "Variant kernel: d6d89ea, where both ran on the variant kernels; plain tiles: sinks on the SM90_SINK "
      "instantiations (f22357f), ALiBi on the SM90_ALIBI ones (bench/LOG.md 2026-12-06-sinks-alibi and "
      "2026-12-06-alibi-v3). \"sinks −inf\": ALiBi with sinks of −inf, the same problem, which runs on the "
      "variant kernel, timed in the same process as the plain tiles' ALiBi. A column's ratios come from one "
      "process; columns from different calls compare through the dense kernel, whose code is the same in all "
      "of them.\n")
print("| dtype | d | N | causal | " + " | ".join(c[0] for c in COLUMNS) + " |")
print("| --- | --- | --- | --- | " + " | ".join("---" for _ in COLUMNS) + " |")
for (dt, d, n, causal), r in sorted(rows.items(), key=lambda kv: (kv[0][0] != "bfloat16", kv[0][1], kv[0][2], kv[0][3])):
    print(f"| {dt} | {d} | {n} | {'yes' if causal else 'no'} | "
          + " | ".join("–" if r.get(c[0]) is None else f"{r[c[0]]:.3f}" for c in COLUMNS) + " |")
