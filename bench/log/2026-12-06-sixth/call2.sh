#!/usr/bin/env bash
# Call 2: this tree built in place for sm_90a; the two d = 128 non-causal tiles (overrides
# sm90_long_tile off / on, and the build's rule) timed in one process on 26 points, checked first;
# then the Hopper test files, whose long-tile tests now force the tile.
#     OUT=<dir> bash bench/log/2026-12-06-sixth/call2.sh
set -uo pipefail
t0=$(date +%s); export MAX_JOBS=16 FA_CUDA_ARCHS=90a OMP_NUM_THREADS=1 PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo "build rc $? $(( $(date +%s) - t0 )) s"
timeout 150 python3 bench/log/2026-12-06-sixth/long_nk_time.py 3 > $OUT/long_nk_ab.txt 2>&1; echo "ab rc $? $(( $(date +%s) - t0 )) s"
grep -A40 "checks failed" $OUT/long_nk_ab.txt
left=$(( 290 - ($(date +%s) - t0) )); [ $left -gt 30 ] || left=1
timeout $left python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests/test_sm90.py \
    tests/test_variants_kernel.py tests/test_bad_input.py > $OUT/tests.txt 2>&1; echo "tests rc $?"
grep -E "^FAILED|^ERROR" $OUT/tests.txt | head; tail -1 $OUT/tests.txt
echo "call $(( $(date +%s) - t0 )) s"
