#!/usr/bin/env bash
# final: build, whole suite, sanitizers on the sm80 backward, the forced-sm80 backward grid (bf16, 3 lengths)
set -uo pipefail
t0=$(date +%s)
MAX_JOBS=16 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
export PYTHONPATH=$PWD
timeout 290 bash tests/gpu.sh > $OUT/suite.log 2>&1; echo "suite rc $?"
grep -E "passed|failed|error" $OUT/suite.log | tail -4
grep -E "^FAILED|^ERROR" $OUT/suite.log | head -10
echo "suite: $(( $(date +%s) - t0 )) s"
FA_KERNEL=sm80 SANITIZE_ONLY=backward timeout 90 bash tests/sanitize.sh memcheck racecheck > $OUT/sanitize.log 2>&1; echo "sanitize rc $?"
grep -E "ERROR SUMMARY|clean|->" $OUT/sanitize.log | tail -6
echo "sanitize: $(( $(date +%s) - t0 )) s"
left=$(( 500 - ($(date +%s) - t0) ))
[ $left -gt 30 ] && timeout $left python3 -m bench.backward --family sm80 --n 1024 4096 16384 --out $OUT/backward_sm80 > $OUT/grid.log 2>&1; echo "grid rc $?"
tail -3 $OUT/grid.log; cat $OUT/backward_sm80.md 2>/dev/null | head -30
echo "all: $(( $(date +%s) - t0 )) s"
