#!/usr/bin/env bash
# final: build HEAD; whole suite; sanitizers on the sm80 backward; the forced-sm80 backward grid
set -uo pipefail
t0=$(date +%s)
MAX_JOBS=16 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
export PYTHONPATH=$PWD
timeout 280 bash tests/gpu.sh > $OUT/suite.log 2>&1; echo "suite rc $?" > $OUT/summary.txt
grep -E "passed|failed|error" $OUT/suite.log | tail -4 >> $OUT/summary.txt
grep -E "^FAILED|^ERROR" $OUT/suite.log | head -10 >> $OUT/summary.txt
echo "suite: $(( $(date +%s) - t0 )) s" >> $OUT/summary.txt
FA_KERNEL=sm80 SANITIZE_ONLY=backward timeout 100 bash tests/sanitize.sh memcheck racecheck > $OUT/sanitize.log 2>&1; echo "sanitize rc $?" >> $OUT/summary.txt
grep -E "ERROR SUMMARY|clean|->" $OUT/sanitize.log | tail -8 >> $OUT/summary.txt
echo "sanitize: $(( $(date +%s) - t0 )) s" >> $OUT/summary.txt
left=$(( 540 - ($(date +%s) - t0) ))
[ $left -gt 40 ] && timeout $left python3 -m bench.backward --family sm80 --n 1024 4096 16384 --out $OUT/backward_sm80 > $OUT/grid.log 2>&1; echo "grid rc $?" >> $OUT/summary.txt
tail -3 $OUT/grid.log
cat $OUT/backward_sm80.md 2>/dev/null | head -30
left=$(( 560 - ($(date +%s) - t0) ))
if [ $left -gt 80 ]; then
  NCU_PASS=backward NCU_SHAPE="4 16 4096 128 0" timeout $left bash tools/sm80/ncu_compare.sh > $OUT/ncu_d128.txt 2>&1
  grep -E "Duration|Executed Instructions  |stall_lg  |stall_barrier  " $OUT/ncu_d128.txt | head -8 >> $OUT/summary.txt
  rm -f $OUT/*.ncu-rep $OUT/*_sass.csv $OUT/*_details.txt $OUT/ncu_sm80_*.log
fi
echo "all: $(( $(date +%s) - t0 )) s" >> $OUT/summary.txt
cat $OUT/summary.txt
