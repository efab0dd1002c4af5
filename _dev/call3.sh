#!/bin/bash
export MAX_JOBS=16
t0=$(date +%s)
python3 setup.py build_ext --inplace > /tmp/build.log 2>&1 || { tail -50 /tmp/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
export PYTHONPATH=$PWD
timeout 230 bash tests/gpu.sh > $OUT/suite.txt 2>&1
grep -E "^FAILED" $OUT/suite.txt | head -30 | cut -c1-200
grep -E "passed|failed" $OUT/suite.txt | tail -3
echo "suite $(( $(date +%s) - t0 )) s"
timeout 60 python3 -m bench.backward --variants --d 64 128 --n 1024 4096 16384 --causal 0 1 --budget 0.15 --out $OUT/backward_variants > $OUT/bvar.log 2>&1
tail -14 $OUT/bvar.log
echo "bench $(( $(date +%s) - t0 )) s"
SANITIZE_ONLY=backward timeout 160 bash tests/sanitize.sh memcheck racecheck > $OUT/sanitize.txt 2>&1
cat /tmp/sanitize_memcheck.log /tmp/sanitize_racecheck.log > $OUT/sanitize_logs.txt 2>/dev/null
grep -E "FAIL|ERROR SUMMARY|RACECHECK SUMMARY|exit" $OUT/sanitize.txt | head -20
grep -c "^ok" $OUT/sanitize_logs.txt
echo "sanitize $(( $(date +%s) - t0 )) s"
