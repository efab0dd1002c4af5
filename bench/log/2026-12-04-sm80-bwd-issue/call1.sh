#!/usr/bin/env bash
# call 1: build df4678f+tools; sanitizers on the sm80 backward; ncu sm80 bwd vs FA2 (d128, d64); suite
set -uo pipefail
t0=$(date +%s)
MAX_JOBS=16 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
export PYTHONPATH=$PWD
FA_KERNEL=sm80 SANITIZE_ONLY=backward timeout 120 bash tests/sanitize.sh memcheck racecheck > $OUT/sanitize.log 2>&1; echo "sanitize rc $?"
grep -E "ERROR SUMMARY|clean|->" $OUT/sanitize.log | tail -8
echo "sanitize: $(( $(date +%s) - t0 )) s"
for shape in "4 16 4096 128 0" "4 32 4096 64 0"; do
  NCU_PASS=backward NCU_SHAPE="$shape" timeout 100 bash tools/sm80/ncu_compare.sh > $OUT/ncu_$(echo $shape | tr ' ' _).txt 2>&1
  echo "ncu $shape rc $?: $(( $(date +%s) - t0 )) s"
  cat $OUT/ncu_$(echo $shape | tr ' ' _).txt | head -120
done
left=$(( 590 - ($(date +%s) - t0) ))
echo "suite budget $left s"
timeout $left bash tests/gpu.sh > $OUT/suite.log 2>&1; echo "suite rc $?"
grep -E "passed|failed|error" $OUT/suite.log | tail -4
grep -E "^FAILED|^ERROR" $OUT/suite.log | head -10
echo "all: $(( $(date +%s) - t0 )) s"
