#!/usr/bin/env bash
# One device call: the full build (every architecture setup.py names) and the whole suite (tests/gpu.sh).
#     OUT=<dir> bash bench/log/2026-12-06-third/suite.sh
set -uo pipefail
t0=$(date +%s); export OMP_NUM_THREADS=1 MAX_JOBS=16
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
git rev-parse HEAD 2>/dev/null | tee $OUT/rev.txt
python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1
echo "build rc $? $(( $(date +%s) - t0 )) s"
timeout $(left 590) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s) - t0 )) s"
grep -E "^FAILED|^ERROR" $OUT/suite.txt | head -20; grep -E "passed|failed" $OUT/suite.txt | tail -3
