#!/usr/bin/env bash
# One device call (≤ 600 s): build for sm_90a, the switched-on path's tests (gradients by the accuracy
# rule; dK and dV the default kernel's bits), then ab.py's three rotated rounds (joint, split and
# SDPA cuDNN in one process). Run from the repository root of exp/issue37-next:
#     bash bench/log/2026-12-06-bwd-next/call.sh
set -uo pipefail
t0=$(date +%s); export MAX_JOBS=16 OMP_NUM_THREADS=1
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
D=bench/log/2026-12-06-bwd-next
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
FA_CUDA_ARCHS=90a python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1
echo "build rc $? $(( $(date +%s) - t0 )) s"; grep -i "spill" $OUT/build.log | grep -v " 0 bytes spill" | head -8
PYTHONPATH=$PWD timeout $(left 300) python3 -m pytest -q -p no:cacheprovider -rfE --tb=short \
    tests/test_backward_kernel.py -k "split_qdo or (test_kernel_gradients_long and sm90)" > $OUT/tests.txt 2>&1
rc=$?; echo "tests rc $rc $(( $(date +%s) - t0 )) s"; grep -E "passed|failed|^FAILED|^ERROR" $OUT/tests.txt | tail -8
[ $rc -ne 0 ] && { echo "tests failed: no timing"; exit 1; }
PYTHONPATH=$PWD timeout $(left 585) python3 $D/ab.py call1 3 > $OUT/ab.jsonl 2> $OUT/ab.err
echo "ab rc $? $(( $(date +%s) - t0 )) s"; tail -3 $OUT/ab.err
python3 $D/summary.py $OUT/ab.jsonl | tee $OUT/summary.txt
