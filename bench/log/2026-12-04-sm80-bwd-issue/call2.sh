#!/usr/bin/env bash
# sm80 backward: base (HEAD) vs B (mask split, counters, dQ pointer, no kk_end) vs C (B + dQ before dK, = tree); tests on C
set -uo pipefail
t0=$(date +%s)
rm -rf /tmp/ab_base /tmp/v_b && mkdir -p /tmp/ab_base /tmp/v_b && tar -xf _dev2/base.tar -C /tmp/ab_base
cp -r csrc setup.py pyproject.toml torch_flashattn /tmp/v_b/ && cp _dev2/B.cu /tmp/v_b/csrc/cuda/sm80_backward.cu
pids=""
for dir in /tmp/ab_base /tmp/v_b; do
  (cd $dir && MAX_JOBS=5 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > build.log 2>&1) & pids="$pids $!"
done
MAX_JOBS=6 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
for p in $pids; do wait $p || { echo "a build failed"; tail -20 /tmp/v_b/build.log /tmp/ab_base/build.log; exit 1; }; done
echo "builds: $(( $(date +%s) - t0 )) s"
export PYTHONPATH=$PWD
for r in 1 2; do
  PYTHONPATH=/tmp/ab_base:$PWD timeout 80 python3 _dev2/bwd80_ab.py base$r
  PYTHONPATH=/tmp/v_b:$PWD timeout 80 python3 _dev2/bwd80_ab.py B$r
  timeout 80 python3 _dev2/bwd80_ab.py C$r
done > $OUT/ab_w1.jsonl 2> $OUT/ab_w1.err
tail -3 $OUT/ab_w1.err
python3 - <<'PY'
import json, os, collections, math
rows = [json.loads(l) for l in open(os.environ["OUT"] + "/ab_w1.jsonl")]
by = collections.defaultdict(dict)
for r in rows: by[(r["d"], r["causal"], r["N"])][r["label"]] = r
gm = collections.defaultdict(list)
for key, v in by.items():
    print(key, " ".join(f"{l}:{v[l]['tflops']}={v[l]['ratio']}" for l in sorted(v)))
    for l in v: gm[(key[0], l)].append(math.log(v[l]["ratio"]))
for l, xs in sorted(gm.items()): print(l, "geomean vs flash", round(math.exp(sum(xs)/len(xs)), 4))
PY
echo "ab: $(( $(date +%s) - t0 )) s"
timeout $(( 585 - ($(date +%s) - t0) )) python3 -m pytest -q -n 14 -p no:cacheprovider tests/test_backward_kernel.py tests/test_older_gpus.py -k "sm80 or varlen or hides or through_lse or cc86" 2>&1 | tail -3
echo "all: $(( $(date +%s) - t0 )) s"
