#!/usr/bin/env bash
# Tenth session, call 1: build; packed walks beside FA3; the whole suite; the variants' sanitizer cases.
set -uo pipefail
export MAX_JOBS=16
t0=$(date +%s)
python3 setup.py build_ext --inplace > $OUT/build.log 2>&1 || { tail -40 $OUT/build.log; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s" | tee $OUT/summary.txt
source .peers/fa3/peers.sh install-fa3 >> $OUT/summary.txt 2>&1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
timeout 150 python3 bench/log/2026-12-04-packed-dynamic/walks.py rank 0.3 auto > $OUT/walks_call1.jsonl 2> $OUT/walks.err
echo "walks rc $?: $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
timeout 280 bash tests/gpu.sh > $OUT/suite.log 2>&1
echo "suite rc $?: $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "passed|failed" $OUT/suite.log | tail -3 | tee -a $OUT/summary.txt
SANITIZE_ONLY=variants timeout 90 bash tests/sanitize.sh memcheck racecheck synccheck > $OUT/sanitize.log 2>&1
echo "sanitize rc $?: $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^->|== compute" $OUT/sanitize.log | tee -a $OUT/summary.txt
