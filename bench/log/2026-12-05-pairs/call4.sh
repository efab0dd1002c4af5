#!/usr/bin/env bash
# Second device call: the build, every test with the pairs grid (and the planning tests), then
# grid_ab.py (tile, persistent, pairs in turn, rotated, five rounds).
set -uo pipefail
t0=$(date +%s)
L=bench/log/2026-12-05-pairs
export FA_CUDA_ARCHS=90a
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
MAX_JOBS=16 python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo "build rc $?" | tee -a $OUT/build.log
echo "build: $(( $(date +%s) - t0 )) s"
timeout 200 python3 -m pytest -q -n 16 -p no:cacheprovider -k "pairs or plan" tests/test_sm90.py \
    tests/test_variants_kernel.py tests/test_c_api.py > $OUT/tests.txt 2>&1; echo "tests rc $?"
tail -n 3 $OUT/tests.txt
echo "tests: $(( $(date +%s) - t0 )) s"
timeout 240 python3 $L/grid_ab.py 5 > $OUT/grid_ab.jsonl 2> $OUT/grid_ab.err; echo "ab rc $?"
tail -n 3 $OUT/grid_ab.err
python3 $L/grid_sum.py $OUT/grid_ab.jsonl
echo "call: $(( $(date +%s) - t0 )) s"
