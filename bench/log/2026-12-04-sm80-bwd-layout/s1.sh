#!/usr/bin/env bash
# sm80 backward layout: build base and candidate, sm80 tests, A/B beside SDPA flash, sanitizers
set -uo pipefail
t0=$(date +%s)
rm -rf /tmp/ab_base && mkdir -p /tmp/ab_base && tar -xf _dev2/base.tar -C /tmp/ab_base
(cd /tmp/ab_base && MAX_JOBS=8 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > /tmp/base_build.log 2>&1) &
bp=$!
MAX_JOBS=8 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
echo "build new: $(( $(date +%s) - t0 )) s"
export PYTHONPATH=$PWD
timeout 170 python3 -m pytest -q -x -n 8 -p no:cacheprovider tests/test_backward_kernel.py -k "sm80 or varlen or hides or through_lse" 2>&1 | tail -4
echo "tests: $(( $(date +%s) - t0 )) s"
wait $bp || { tail -20 /tmp/base_build.log; exit 1; }
echo "build base: $(( $(date +%s) - t0 )) s"
for r in 1 2; do
  PYTHONPATH=/tmp/ab_base:$PWD timeout 80 python3 _dev2/bwd80_ab.py base$r
  timeout 80 python3 _dev2/bwd80_ab.py cand$r
done > $OUT/ab.jsonl 2> $OUT/ab.err
tail -3 $OUT/ab.err
python3 - <<'PY'
import json, os, collections
rows = [json.loads(l) for l in open(os.environ["OUT"] + "/ab.jsonl")]
by = collections.defaultdict(dict)
for r in rows: by[(r["d"], r["causal"], r["N"])][r["label"]] = r
import math
gm = collections.defaultdict(list)
for key, v in by.items():
    line = " ".join(f"{l}:{v[l]['tflops']}/{v[l]['flash']}={v[l]['ratio']}" for l in sorted(v))
    print(key, line)
    for l in v: gm[l].append(math.log(v[l]["ratio"]))
for l, xs in sorted(gm.items()): print(l, "geomean vs flash", round(math.exp(sum(xs)/len(xs)), 4))
PY
echo "ab: $(( $(date +%s) - t0 )) s"
FA_KERNEL=sm80 SANITIZE_ONLY=backward timeout 120 bash tests/sanitize.sh memcheck racecheck 2>&1 | tail -6
echo "all: $(( $(date +%s) - t0 )) s"
