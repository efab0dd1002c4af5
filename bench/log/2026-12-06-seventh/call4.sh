#!/usr/bin/env bash
# One call, carry [".peers/fa3"], after call3: this tree (FA_SM90_LONG_NK = 8192; the transformers
# backend's masking_utils as a global) built in place for sm_90a; peers_tile.py again (its window
# point without FA3, whose wheel has no local attention); then the Hopper and transformers test files.
#     OUT=<dir> bash bench/log/2026-12-06-seventh/call4.sh
set -uo pipefail
t0=$(date +%s); export MAX_JOBS=16 FA_CUDA_ARCHS=90a OMP_NUM_THREADS=1 PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
source .peers/fa3/peers.sh install-fa3
python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo "build rc $? $(( $(date +%s) - t0 )) s"
timeout 200 python3 bench/log/2026-12-06-seventh/peers_tile.py 3 > $OUT/peers_tile.txt 2>&1; echo "timing rc $? $(( $(date +%s) - t0 )) s"
grep -A22 "checks failed" $OUT/peers_tile.txt || tail -5 $OUT/peers_tile.txt
left=$(( 420 - ($(date +%s) - t0) )); [ $left -gt 30 ] || left=1
timeout $left python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests/test_sm90.py \
    tests/test_variants_kernel.py tests/test_hf_masks.py tests/test_variants.py > $OUT/tests.txt 2>&1
echo "tests rc $?"; grep -E "^FAILED|^ERROR" $OUT/tests.txt | head; tail -1 $OUT/tests.txt
echo "call $(( $(date +%s) - t0 )) s"
