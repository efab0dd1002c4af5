#!/bin/bash
export MAX_JOBS=16
t0=$(date +%s)
python3 setup.py build_ext --inplace > $OUT/build.log 2>&1 || { tail -50 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
export PYTHONPATH=$PWD
timeout 100 python3 -m bench.backward --variants --d 64 128 --n 1024 4096 16384 --causal 0 1 --budget 0.15 --out $OUT/backward_variants > $OUT/bvar.log 2>&1
tail -15 $OUT/bvar.log
echo "bench $(( $(date +%s) - t0 )) s"
timeout 90 ncu --clock-control none -k regex:fa_sm80_backward_kernel -c 3 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis python3 _dev/prof.py > $OUT/ncu.txt 2>&1
echo "ncu $(( $(date +%s) - t0 )) s"
timeout 130 python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests/test_backward_kernel.py tests/test_backward.py -k "varlen or key_mask or softcap or alibi or combo or bad or take" > $OUT/tests.txt 2>&1
tail -3 $OUT/tests.txt
echo "tests $(( $(date +%s) - t0 )) s"
SANITIZE_ONLY=backward timeout 150 bash tests/sanitize.sh memcheck racecheck > $OUT/sanitize.txt 2>&1
cp /tmp/sanitize_memcheck.log /tmp/sanitize_racecheck.log $OUT/ 2>/dev/null
grep -E "FAIL|ERROR SUMMARY|RACECHECK SUMMARY|exit" $OUT/sanitize.txt | head -20
grep -c "^ok" /tmp/sanitize_memcheck.log /tmp/sanitize_racecheck.log
echo "sanitize $(( $(date +%s) - t0 )) s"
