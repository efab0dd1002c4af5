#!/usr/bin/env bash
# One device call: the d = 64 tile's switches (softmax fence, early O rescale, rescale skip per 8 rows)
# and the 2-consumer d = 64 tile with the d = 128 causal recipe, as tune.py variants beside the
# production kernel; two rounds. The in-place build (sm_90a) and the variants build side by side.
set -uo pipefail
t0=$(date +%s)
export FA_CUDA_ARCHS=90a BUILD=$PWD/_dev2/tune TUNE_PROD=auto
export TUNE_VARIANTS='64,128,2,3,1;64,128,2,3,1,SOFTMAX_FENCE=1;64,128,2,3,1,RESCALE_EARLY=1;64,128,2,3,1,RESCALE_SKIP=2;64,128,2,3,1,SOFTMAX_FENCE=1,RESCALE_EARLY=1;64,128,2,2,1,SOFTMAX_FENCE=1,RESCALE_EARLY=1'
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p $BUILD
python3 -m tools.sm90.tune --d 64 --build-only > $OUT/varbuild.log 2>&1 &
if [ ! -f torch_flashattn/_C.cpython-*.so ] || [ "${REBUILD:-1}" = 1 ]; then
  MAX_JOBS=12 python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo "build rc $?" | tee -a $OUT/build.log
fi
wait
grep -i "spill\|failed" $OUT/varbuild.log | head -12
echo "builds: $(( $(date +%s) - t0 )) s"
for r in 1 2; do
  TUNE_PREBUILT=1 timeout 200 python3 -m tools.sm90.tune --d 64 --n 2k 4k 8k 16k > $OUT/tune_r$r.txt 2>&1; echo "tune r$r rc $?"
  tail -n 12 $OUT/tune_r$r.txt
done
echo "call: $(( $(date +%s) - t0 )) s"
