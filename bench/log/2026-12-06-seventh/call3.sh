#!/usr/bin/env bash
# One call, carry [".peers/fa3"]: this tree built in place for sm_90a while tools/sm90/tune.py builds
# two 2-consumer d = 128 variants with wider key blocks (BN 160 and 176, FlashAttention-3's non-causal
# width; LONG_NK = 2^40: non-causal on them at every length); peers_tile.py (our two d = 128 tiles and
# the build's rule beside FA3 and cuDNN, checked first); tune.py's timing of the wide-block variants
# beside the production tiles (long_off, long_on); then tests/test_sm90.py with the time left.
#     OUT=<dir> bash bench/log/2026-12-06-seventh/call3.sh
set -uo pipefail
t0=$(date +%s); export MAX_JOBS=16 FA_CUDA_ARCHS=90a OMP_NUM_THREADS=1 PYTHONPATH=$PWD
export TUNE_PROD="long_off,long_on" TUNE_VARIANTS="128,176,2,2,1,LONG_NK=1099511627776;128,160,2,2,1,LONG_NK=1099511627776"
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
source .peers/fa3/peers.sh install-fa3
python3 -m tools.sm90.tune --d 128 --build-only > $OUT/tune_build.log 2>&1 &
tb=$!
python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo "build rc $? $(( $(date +%s) - t0 )) s"
timeout 230 python3 bench/log/2026-12-06-seventh/peers_tile.py 3 > $OUT/peers_tile.txt 2>&1; echo "timing rc $? $(( $(date +%s) - t0 )) s"
grep -A20 "checks failed" $OUT/peers_tile.txt
wait $tb; echo "tune build rc $? $(( $(date +%s) - t0 )) s"; tail -3 $OUT/tune_build.log
TUNE_PREBUILT=1 timeout 150 python3 -m tools.sm90.tune --d 128 --n 2k 4k 8k 16k --rounds 3 > $OUT/tune.txt 2>&1
echo "tune rc $? $(( $(date +%s) - t0 )) s"; tail -14 $OUT/tune.txt
left=$(( 570 - ($(date +%s) - t0) )); [ $left -gt 30 ] || left=1
timeout $left python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests/test_sm90.py > $OUT/tests.txt 2>&1
echo "tests rc $?"; grep -E "^FAILED|^ERROR" $OUT/tests.txt | head; tail -1 $OUT/tests.txt
echo "call $(( $(date +%s) - t0 )) s"
