"""Summary of bwd_ab.py lines: per point the TFLOP/s of labels base* and NEW* (argv[2], default new), NEW / base.
    python3 ab_sum.py ab.jsonl [NEW]"""
import collections, json, math, sys
NEW = sys.argv[2] if len(sys.argv) > 2 else "new"
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = collections.defaultdict(dict)
for r in rows:
    by[(r["d"], r["causal"], r["N"])][r["label"]] = r["tflops"]
logs = []
for key, v in sorted(by.items()):
    base = [v[l] for l in sorted(v) if l.startswith("base")]
    new = [v[l] for l in sorted(v) if l.startswith(NEW)]
    ratio = (sum(new) / len(new)) / (sum(base) / len(base))
    logs.append(math.log(ratio))
    print(key, "base", base, NEW, new, f"{NEW}/base {ratio:.4f}")
print(f"geomean {NEW}/base {math.exp(sum(logs) / len(logs)):.4f} over {len(logs)} points")
