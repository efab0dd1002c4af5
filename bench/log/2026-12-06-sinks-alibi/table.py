"""bench/results/variants_own_dense.md from this folder's ratio.py runs: for each point, sinks (calls 2
and 4, H200) and ALiBi (call 5, H100) against our dense kernel on the same tensors, medians over the
rounds of each build, d6d89ea ("before") and this session's kernels ("after").

    python3 bench/log/2026-12-06-sinks-alibi/table.py > bench/results/variants_own_dense.md
"""
import json
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNS = {"sinks": [("call2", "H200"), ("call4", "H200")], "alibi": [("call5", "H100")]}


def medians(path):
    t = defaultdict(list)
    for line in open(path):
        r = json.loads(line)
        if "who" in r:
            t[(r["label"], r["dtype"], r["d"], r["N"], r["causal"], r["who"])].append(r["tflops"])
    return {k: statistics.median(v) for k, v in t.items()}


rows = defaultdict(dict)
for who, calls in RUNS.items():
    for call, gpu in calls:
        m = medians(HERE / call / "ratio.jsonl")
        for (label, dt, d, n, causal, w), x in m.items():
            if w != who:
                continue
            dense = m[(label, dt, d, n, causal, "dense")]
            rows[(dt, d, n, causal)][(who, label, call)] = x / dense
print("Sinks and ALiBi against our own dense kernel on the same tensors (TFLOP/s ratio, medians of three "
      "rounds per build; `bench/log/2026-12-06-sinks-alibi/ratio.py`, bf16 unless named, B · N = 16k, "
      "H · d = 2048). Before: d6d89ea, where both ran on the variant kernels; after: the plain tiles' "
      "SINK kernels (f22357f, taken) and SM90_ALIBI kernels (615c1ae, withdrawn for an accuracy defect: "
      "bench/LOG.md 2026-12-06-sinks-alibi; ALiBi runs on the variant kernel, the \"before\" column). Sinks "
      "on the H200 (calls 2 and 4), ALiBi on an H100 (call 5).\n")
print("| dtype | d | N | causal | sinks before (call 2) | sinks after (call 2) | sinks after (call 4) | "
      "ALiBi before (call 5) | ALiBi after (call 5) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for (dt, d, n, causal), r in sorted(rows.items(), key=lambda kv: (kv[0][0] != "bfloat16", kv[0][1], kv[0][2], kv[0][3])):
    cells = [r.get(k) for k in (("sinks", "base", "call2"), ("sinks", "new", "call2"), ("sinks", "new", "call4"),
                                ("alibi", "base", "call5"), ("alibi", "new", "call5"))]
    print(f"| {dt} | {d} | {n} | {'yes' if causal else 'no'} | "
          + " | ".join("–" if c is None else f"{c:.3f}" for c in cells) + " |")
