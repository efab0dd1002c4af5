#!/usr/bin/env bash
# Call 3 (carries .peers/fa4a): FA4's first half stashed for call 5; this tree built in place for sm_90a.
set -uo pipefail
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
git rev-parse HEAD | tee $OUT/rev.txt
bash .peers/fa4a/peers.sh stash > $OUT/stash.txt 2>&1; tail -1 $OUT/stash.txt
MAX_JOBS=16 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo "build rc $? $(( $(date +%s) - t0 )) s"
