#!/usr/bin/env bash
# base (main), A (generic stores), B (fused P/dS stores: the working tree); cc86 test on B
set -uo pipefail
t0=$(date +%s)
rm -rf /tmp/ab_base /tmp/v_a && mkdir -p /tmp/ab_base /tmp/v_a && tar -xf _dev2/base.tar -C /tmp/ab_base && tar -xf _dev2/candA.tar -C /tmp/v_a
pids=""
for dir in /tmp/ab_base /tmp/v_a; do
  (cd $dir && MAX_JOBS=5 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > build.log 2>&1) & pids="$pids $!"
done
MAX_JOBS=6 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
for p in $pids; do wait $p || { echo "a build failed"; tail -20 /tmp/v_a/build.log; exit 1; }; done
echo "builds: $(( $(date +%s) - t0 )) s"
export PYTHONPATH=$PWD
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_older_gpus.py -k cc86 2>&1 | tail -3
for r in 1 2; do
  PYTHONPATH=/tmp/ab_base:$PWD timeout 80 python3 _dev2/bwd80_ab.py base$r
  PYTHONPATH=/tmp/v_a:$PWD timeout 80 python3 _dev2/bwd80_ab.py A$r
  timeout 80 python3 _dev2/bwd80_ab.py B$r
done > $OUT/ab3.jsonl 2> $OUT/ab3.err
tail -3 $OUT/ab3.err
python3 - <<'PY'
import json, os, collections, math
rows = [json.loads(l) for l in open(os.environ["OUT"] + "/ab3.jsonl")]
by = collections.defaultdict(dict)
for r in rows: by[(r["d"], r["causal"], r["N"])][r["label"]] = r
gm = collections.defaultdict(list)
for key, v in by.items():
    print(key, " ".join(f"{l}:{v[l]['tflops']}={v[l]['ratio']}" for l in sorted(v)))
    for l in v: gm[(key[0], l)].append(math.log(v[l]["ratio"]))
for l, xs in sorted(gm.items()): print(l, "geomean vs flash", round(math.exp(sum(xs)/len(xs)), 4))
PY
echo "all: $(( $(date +%s) - t0 )) s"
