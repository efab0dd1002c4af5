#!/bin/bash
export MAX_JOBS=16
t0=$(date +%s)
python3 setup.py build_ext --inplace > $OUT/build.log 2>&1 || { tail -50 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
export PYTHONPATH=$PWD
timeout 120 python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests/test_backward_kernel.py tests/test_backward.py > $OUT/tests.txt 2>&1
tail -25 $OUT/tests.txt
echo "tests $(( $(date +%s) - t0 )) s"
timeout 100 python3 -m bench.backward --variants --d 64 128 --n 1024 4096 16384 --causal 0 1 --budget 0.15 --out $OUT/backward_variants > $OUT/bvar.log 2>&1
tail -16 $OUT/bvar.log
echo "bench $(( $(date +%s) - t0 )) s"
timeout 200 bash tests/gpu.sh > $OUT/suite.txt 2>&1
grep -E "passed|failed|error" $OUT/suite.txt | tail -5
echo "suite $(( $(date +%s) - t0 )) s"
SANITIZE_ONLY=backward timeout 150 bash tests/sanitize.sh memcheck racecheck > $OUT/sanitize.txt 2>&1
grep -E "FAIL|ERROR SUMMARY|hazard|ok  backward varlen" $OUT/sanitize.txt | sort | uniq -c | head -20
echo "sanitize $(( $(date +%s) - t0 )) s"
