#!/usr/bin/env bash
# One call, carry [".peers/fa3"], after call3: this tree (FA_SM90_LONG_NK = 8192; the transformers
# backend's masking_utils as a global) built for every architecture (pip install -e); peers_tile.py
# again after the whole suite, with the time left (its window point without FA3, whose wheel has no
# local attention).
#     OUT=<dir> bash bench/log/2026-12-06-seventh/call4.sh      (END: the seconds it may take)
set -uo pipefail
t0=$(date +%s); export OMP_NUM_THREADS=1 MAX_JOBS=16 PYTHONPATH=$PWD
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
source .peers/fa3/peers.sh install-fa3
python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1
echo "build rc $? $(( $(date +%s) - t0 )) s"
timeout $(left $(( ${END:-590} - 20 ))) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s) - t0 )) s"
grep -E "^FAILED|^ERROR" $OUT/suite.txt | head -20; grep -E "passed|failed" $OUT/suite.txt | tail -3
[ "${TIMING:-1}" = 1 ] && { timeout $(left ${END:-590}) python3 bench/log/2026-12-06-seventh/peers_tile.py ${ROUNDS:-3} > $OUT/peers_tile.txt 2>&1; echo "timing rc $? $(( $(date +%s) - t0 )) s"; }
[ "${TIMING:-1}" = 1 ] && { grep -A22 "checks failed" $OUT/peers_tile.txt || tail -5 $OUT/peers_tile.txt; }
