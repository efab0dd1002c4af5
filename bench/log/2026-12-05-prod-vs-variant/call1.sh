#!/usr/bin/env bash
# One device call: the in-place build (sm_90a) and tune.py's two variant libraries side by side,
# then ab.py (three rounds) and tune.py's production columns beside the variant at d = 128.
set -uo pipefail
t0=$(date +%s)
L=bench/log/2026-12-05-prod-vs-variant
export FA_CUDA_ARCHS=90a BUILD=$PWD/_dev2/tune TUNE_VARIANTS='128,128,2,2,1;64,128,2,3,1'
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p $BUILD
python3 -m tools.sm90.tune --d 64 128 --build-only > $OUT/varbuild.log 2>&1 &
MAX_JOBS=14 python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo "build rc $?" | tee -a $OUT/build.log
wait
tail -n 3 $OUT/varbuild.log
echo "builds: $(( $(date +%s) - t0 )) s"
TUNE_PREBUILT=1 timeout 200 python3 $L/ab.py 3 > $OUT/ab.jsonl 2> $OUT/ab.err; echo "ab rc $?"
tail -n 3 $OUT/ab.err
python3 $L/ab_sum.py $OUT/ab.jsonl
echo "ab: $(( $(date +%s) - t0 )) s"
TUNE_VARIANTS='128,128,2,2,1' TUNE_PROD=auto,tail0,tile,persistent TUNE_PREBUILT=1 timeout 200 \
    python3 -m tools.sm90.tune --d 128 --n 4k 8k 16k > $OUT/tune.txt 2>&1; echo "tune rc $?"
cat $OUT/tune.txt | tail -n 8
echo "call: $(( $(date +%s) - t0 )) s"
