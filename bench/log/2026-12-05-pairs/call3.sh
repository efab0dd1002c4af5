#!/usr/bin/env bash
# One device call: the paired causal walk (sm90_grid="pairs") built in place (sm_90a), its tests,
# then tune.py's production columns (one CTA per tile, the persistent snake, pairs, the automatic
# choice) on FlashAttention's grid at d = 64, 128 and 256, two rounds.
set -uo pipefail
t0=$(date +%s)
export FA_CUDA_ARCHS=90a
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
MAX_JOBS=16 python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo "build rc $?" | tee -a $OUT/build.log
echo "build: $(( $(date +%s) - t0 )) s"
timeout 200 python3 -m pytest -q -x -n 16 -p no:cacheprovider -k "pairs or plan" tests/test_sm90.py \
    tests/test_variants_kernel.py tests/test_c_api.py > $OUT/tests.txt 2>&1; echo "tests rc $?"
tail -n 3 $OUT/tests.txt
echo "tests: $(( $(date +%s) - t0 )) s"
for r in 1 2; do
  TUNE_PROD=tile,persistent,pairs,auto timeout 150 python3 -m tools.sm90.tune --no-variants --d 64 128 256 \
      --n 2k 4k 8k 16k > $OUT/tune_r$r.txt 2>&1; echo "tune r$r rc $?"
  grep -A6 "^causal" $OUT/tune_r$r.txt | grep -v "^     0"
done
echo "call: $(( $(date +%s) - t0 )) s"
