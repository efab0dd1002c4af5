#!/usr/bin/env bash
# One call, carry [".peers/fa3"]: this tree built for every architecture (pip install -e) while
# tools/sm90/cap_tune.py builds its two sm90.cu libraries (the d = 128 tile on 128- and 176-key
# blocks); the whole suite first (each failing test's id in $OUT/failures.txt as it fails:
# FA_FAILURES); then cap_tune (softcap calls beside FA3) and the seventh session's peers_tile.py
# (our d = 128 tiles beside FA3 and cuDNN) with the time left.
#     OUT=<dir> bash bench/log/2026-12-06-eighth/call2.sh      (END: the seconds it may take)
set -uo pipefail
t0=$(date +%s); export MAX_JOBS=16 PYTHONPATH=$PWD BUILD=/tmp/sm90_cap_tune
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
source .peers/fa3/peers.sh install-fa3
python3 -m tools.sm90.cap_tune --build-only > $OUT/cap_build.txt 2>&1 &
libs=$!
python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1
echo "build rc $? $(( $(date +%s) - t0 )) s"
OMP_NUM_THREADS=1 FA_FAILURES=$OUT/failures.txt timeout $(left $(( ${END:-570} - 140 ))) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s) - t0 )) s"
cat $OUT/failures.txt 2>/dev/null | head -20; grep -E "passed|failed" $OUT/suite.txt | tail -3
wait $libs; cut -c1-300 $OUT/cap_build.txt
timeout $(left $(( ${END:-570} - 50 ))) python3 -m tools.sm90.cap_tune --prebuilt --rounds ${ROUNDS:-2} > $OUT/cap_tune.txt 2>&1
echo "cap_tune rc $? $(( $(date +%s) - t0 )) s"; grep -E "check|fail" $OUT/cap_tune.txt | cut -c1-300; tail -11 $OUT/cap_tune.txt
timeout $(left ${END:-570}) python3 bench/log/2026-12-06-seventh/peers_tile.py 1 > $OUT/peers_tile.txt 2>&1
echo "timing rc $? $(( $(date +%s) - t0 )) s"; grep -A22 "checks failed" $OUT/peers_tile.txt || tail -5 $OUT/peers_tile.txt
