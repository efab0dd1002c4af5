#!/usr/bin/env bash
# Call 2 (H200, the machine call 1 left warm): carries .peers/fa3. FA3 installed under /tmp for call 3;
# the sm_80 backward A/B (bwd80_ab.py: ours forced to sm_80 beside SDPA flash in one process, 4k and
# 16k keys, d 64 / 128, causal and not), c5da529 then this tree, two rounds; then compute-sanitizer's
# memcheck and racecheck over the backward cases.
set -uo pipefail
t0=$(date +%s)
ROOT=$PWD
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3.txt 2>&1; tail -1 $OUT/fa3.txt
AB=$ROOT/bench/log/2026-12-04-sm80-bwd-layout/bwd80_ab.py
for r in 1 2; do
  (cd /tmp/base && AB_N="4096 16384" PYTHONPATH=/tmp/base timeout 60 python3 $AB base_$r)
  (cd $ROOT && AB_N="4096 16384" PYTHONPATH=$ROOT timeout 60 python3 $AB new_$r)
done > $OUT/ab.jsonl 2> $OUT/ab.err
tail -3 $OUT/ab.err
echo "ab: $(( $(date +%s) - t0 )) s"
SANITIZE_ONLY=backward timeout 300 bash tests/sanitize.sh memcheck racecheck > $OUT/sanitize.txt 2>&1; echo "sanitize rc $?" >> $OUT/sanitize.txt
python3 - <<'PY'
import json, os, collections, math
rows = [json.loads(l) for l in open(os.environ["OUT"] + "/ab.jsonl")]
by = collections.defaultdict(dict)
for r in rows: by[(r["d"], r["causal"], r["N"])][r["label"]] = r
gm = collections.defaultdict(list)
for key, v in sorted(by.items()):
    print(key, " ".join(f"{l}:{v[l]['tflops']}/{v[l]['ratio']}" for l in sorted(v)))
    for l in v: gm[(key[0], l)].append(math.log(v[l]["ratio"]))
for l, xs in sorted(gm.items()): print(l, "geomean ours/flash", round(math.exp(sum(xs)/len(xs)), 4), len(xs))
PY
cat $OUT/sanitize.txt | tail -8
echo "call: $(( $(date +%s) - t0 )) s"
