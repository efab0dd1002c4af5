#!/usr/bin/env bash
# One call, carry [".peers/fa3"], when too little device time is left for call4: this tree built for
# every architecture (pip install -e); the test files the session's changes touch (the Hopper tiles'
# rule, the transformers backend under torch 2.11); then peers_tile.py with the time left.
#     END=<seconds> OUT=<dir> bash bench/log/2026-12-06-seventh/call5.sh
set -uo pipefail
t0=$(date +%s); export OMP_NUM_THREADS=1 MAX_JOBS=16 PYTHONPATH=$PWD
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
source .peers/fa3/peers.sh install-fa3
python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1
echo "build rc $? $(( $(date +%s) - t0 )) s"
timeout $(left $(( ${END:-590} - 20 ))) python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short \
    tests/test_sm90.py tests/test_variants_kernel.py tests/test_hf_masks.py tests/test_hf_models.py > $OUT/tests.txt 2>&1
echo "tests rc $? $(( $(date +%s) - t0 )) s"; grep -E "^FAILED|^ERROR" $OUT/tests.txt | head; tail -1 $OUT/tests.txt
timeout $(left ${END:-590}) python3 bench/log/2026-12-06-seventh/peers_tile.py ${ROUNDS:-1} > $OUT/peers_tile.txt 2>&1
echo "timing rc $? $(( $(date +%s) - t0 )) s"; grep -A22 "checks failed" $OUT/peers_tile.txt || tail -3 $OUT/peers_tile.txt
