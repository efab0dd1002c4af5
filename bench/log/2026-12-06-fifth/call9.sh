#!/usr/bin/env bash
# Call 9: this tree built for sm_90a (turing.cu as compute_75 PTX), then compute-sanitizer over the
# kernels with exact exponents past |m · c| = 2^20, their new scores-of-1e9 cases included
# (tests/sanitize_cases.py): the Turing kernel's cases, the sm_80 kernel's plain ones, the Hopper kernel's.
set -uo pipefail
t0=$(date +%s); export PYTHONPATH=$PWD
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
rm -rf build torch_flashattn/_C*.so
MAX_JOBS=16 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo "build rc $? $(( $(date +%s) - t0 )) s"
for only in turing sm80 sm90; do
    [ $(left 420) -lt 20 ] && { echo "$only: no time left"; continue; }
    SANITIZE_ONLY=$only timeout $(left 440) bash tests/sanitize.sh memcheck racecheck > $OUT/sanitize_$only.txt 2>&1
    echo "$only rc $? $(( $(date +%s) - t0 )) s"; grep -E "^->" $OUT/sanitize_$only.txt
    grep -hE "scores 1e9|^FAIL" /tmp/sanitize_memcheck.log /tmp/sanitize_racecheck.log | cut -c1-80 | sort | uniq -c | head -12
    cp /tmp/sanitize_memcheck.log $OUT/memcheck_$only.log 2>/dev/null; cp /tmp/sanitize_racecheck.log $OUT/racecheck_$only.log 2>/dev/null
done
