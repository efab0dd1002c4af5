#!/usr/bin/env bash
# One call, carry [".peers/fa3"]: this tree (FA_SM90_LONG_NK = 8192; the transformers backend's
# masking_utils as a global; the softcap kernels' exponentials half on the FMA pipe,
# FA_SM90_CAP_EX2_FMA = 4) built for every architecture (pip install -e) while tools/sm90/cap_ex2.py
# builds sm90.cu alone with K = 0, 2, 4, 6, 8; then cap_ex2's checks and timing (FA3 beside it), then
# the whole suite with the time left.
#     OUT=<dir> bash bench/log/2026-12-06-eighth/call1.sh      (END: the seconds it may take)
set -uo pipefail
t0=$(date +%s); export MAX_JOBS=16 PYTHONPATH=$PWD BUILD=/tmp/sm90_cap_ex2 KS="${KS:-0 2 4 6 8}"
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
source .peers/fa3/peers.sh install-fa3
python3 -m tools.sm90.cap_ex2 --build-only --k $KS > $OUT/cap_build.txt 2>&1 &
libs=$!
python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1
echo "build rc $? $(( $(date +%s) - t0 )) s"
wait $libs; echo "libraries rc $? $(( $(date +%s) - t0 )) s"; cut -c1-400 $OUT/cap_build.txt
timeout $(left 270) python3 -m tools.sm90.cap_ex2 --prebuilt --k $KS --rounds ${ROUNDS:-2} > $OUT/cap_ex2.txt 2>&1
echo "cap_ex2 rc $? $(( $(date +%s) - t0 )) s"; grep -E "check|fail" $OUT/cap_ex2.txt | cut -c1-300; tail -11 $OUT/cap_ex2.txt
export OMP_NUM_THREADS=1
timeout $(left ${END:-560}) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s) - t0 )) s"
grep -E "^FAILED|^ERROR" $OUT/suite.txt | head -20; grep -E "passed|failed" $OUT/suite.txt | tail -3
