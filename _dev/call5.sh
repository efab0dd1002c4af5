export MAX_JOBS=16 OMP_NUM_THREADS=1 PYTHONPATH=$PWD
python3 setup.py build_ext --inplace > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
echo built
SANITIZE_ONLY=backward timeout 75 bash tests/sanitize.sh racecheck memcheck > $OUT/sanitize.txt 2>&1
grep -E "SUMMARY|clean|exit|FAIL" $OUT/sanitize.txt | head -8
timeout 215 bash tests/gpu.sh > $OUT/suite.txt 2>&1; echo suite rc $?
grep -E "passed|failed|FAILED|ERROR" $OUT/suite.txt | tail -12
