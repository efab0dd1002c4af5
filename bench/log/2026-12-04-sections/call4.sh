#!/usr/bin/env bash
# Call 4: base (2e2a0f3, sm_90a) and this tree built side by side; sections in turn with FA3; ab_time
# base/new x2; the whole suite; the sanitizers.
set -uo pipefail
export MAX_JOBS=16
t0=$(date +%s)
rm -rf /tmp/ab_base && mkdir -p /tmp/ab_base && tar -xf _dev2/base.tar -C /tmp/ab_base
(cd /tmp/ab_base && FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > $OUT/base_build.log 2>&1) &
python3 setup.py build_ext --inplace > $OUT/build.log 2>&1 || { tail -40 $OUT/build.log; exit 1; }
wait
echo "builds: $(( $(date +%s) - t0 )) s" | tee $OUT/summary.txt
source .peers/fa3/peers.sh install-fa3 >> $OUT/summary.txt 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
timeout 150 python3 bench/log/2026-12-04-sections/sections.py call4 0.3 > $OUT/sections_call4.jsonl 2> $OUT/err.txt
echo "sections: $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
timeout 260 bash tests/gpu.sh > $OUT/suite.log 2>&1
echo "suite rc $?: $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "passed|failed" $OUT/suite.log | tail -3 | tee -a $OUT/summary.txt
for r in 1 2; do
  [ $(( $(date +%s) - t0 )) -gt 520 ] && break
  PYTHONPATH=/tmp/ab_base timeout 60 python3 tools/ab_time.py base$r >> $OUT/ab_call4.jsonl 2>> $OUT/err.txt
  PYTHONPATH=$PWD timeout 60 python3 tools/ab_time.py new$r >> $OUT/ab_call4.jsonl 2>> $OUT/err.txt
done
echo "ab: $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
left=$(( 585 - ($(date +%s) - t0) )); [ $left -gt 5 ] && SANITIZE_ONLY=sm90 timeout $left bash tests/sanitize.sh memcheck racecheck > $OUT/sanitize.log 2>&1
echo "sanitize rc $?: $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^->|== compute" $OUT/sanitize.log | tee -a $OUT/summary.txt
tail -5 $OUT/err.txt
