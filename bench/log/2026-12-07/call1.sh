#!/usr/bin/env bash
# One call, carry [".peers/fa3"]: this tree built for every architecture (pip install -e) while
# tools/sm90/cap_tune.py builds four sm90.cu libraries (the softcap kernels' row sums on the tensor
# cores or not, FA_SM90_CAP_ROWSUM, on 128- or 176-key blocks at d = 128); then cap_tune (each
# library checked against the float64 reference, then timed beside FA3's softcap); then every
# softcap test, then the whole suite with the time left (failing ids in $OUT/failures*.txt as they
# fail).
#     OUT=<dir> END=<seconds> bash bench/log/2026-12-07/call1.sh
set -uo pipefail
t0=$(date +%s); export MAX_JOBS=16 PYTHONPATH=$PWD BUILD=/tmp/sm90_cap_tune
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
BN176=FA_SM90_D128_BN=176,FA_SM90_D128_STAGES=2,FA_SM90_D128_CONSUMERS=2,FA_SM90_D128_PINGPONG=1
VARIANTS="off=FA_SM90_CAP_ROWSUM=0 on= bn176_off=$BN176,FA_SM90_CAP_ROWSUM=0 bn176_on=$BN176"
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
source .peers/fa3/peers.sh install-fa3
python3 -m tools.sm90.cap_tune --build-only --variants $VARIANTS > $OUT/cap_build.txt 2>&1 &
libs=$!
python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1
echo "build rc $? $(( $(date +%s) - t0 )) s"
wait $libs; cut -c1-300 $OUT/cap_build.txt
timeout $(left $(( ${END:-585} - 200 ))) python3 -m tools.sm90.cap_tune --prebuilt --rounds ${ROUNDS:-2} --variants $VARIANTS > $OUT/cap_tune.txt 2>&1
echo "cap_tune rc $? $(( $(date +%s) - t0 )) s"; grep -E "check|fail" $OUT/cap_tune.txt | cut -c1-300; tail -12 $OUT/cap_tune.txt
OMP_NUM_THREADS=1 FA_FAILURES=$OUT/failures_softcap.txt timeout $(left $(( ${END:-585} - 120 ))) \
    python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests -k softcap > $OUT/softcap_tests.txt 2>&1
echo "softcap tests rc $? $(( $(date +%s) - t0 )) s"; head -20 $OUT/failures_softcap.txt 2>/dev/null; tail -2 $OUT/softcap_tests.txt
OMP_NUM_THREADS=1 FA_FAILURES=$OUT/failures.txt timeout $(left ${END:-585}) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s) - t0 )) s"
head -20 $OUT/failures.txt 2>/dev/null; grep -E "passed|failed" $OUT/suite.txt | tail -3
