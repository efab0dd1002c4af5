#!/usr/bin/env bash
# Runs compute-sanitizer's memcheck, racecheck, initcheck and synccheck over tests/sanitize_cases.py
# (every CUDA kernel family, tails, causal, GQA, strided and misaligned views; initcheck leaves out
# the Hopper kernel, whose TMA stores it does not see as writes). Exits non-zero on any
# sanitizer report or wrong result. Needs a CUDA GPU and the built extension:
#
#     tests/sanitize.sh            # all four tools
#     tests/sanitize.sh memcheck   # one tool
#     SANITIZE_ONLY=kvcache tests/sanitize.sh   # the decode cases only
#     SANITIZE_ONLY=sm90 tests/sanitize.sh memcheck racecheck synccheck   # the Hopper kernel's only
#     SANITIZE_ONLY=sm80 tests/sanitize.sh memcheck racecheck   # the sm_80 kernel's plain cases only
#     SANITIZE_ONLY=variants tests/sanitize.sh   # the variants and packed sequences (sm90, sm80) only
#     SANITIZE_ONLY=extra tests/sanitize.sh memcheck racecheck   # sinks alone, ALiBi alone on the Hopper kernel
#     SANITIZE_ONLY=counter tests/sanitize.sh memcheck racecheck synccheck   # unpacked calls on the packed walk
#     SANITIZE_ONLY=backward tests/sanitize.sh memcheck racecheck   # the backward kernel only
#     SANITIZE_ONLY=decode_step tests/sanitize.sh memcheck   # attention calls on the split-KV kernel only
set -uo pipefail
cd "$(dirname "$0")/.."
# The repository root on the path: an in-place build (setup.py build_ext --inplace) imports from here.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
tools=("$@")
[ ${#tools[@]} -eq 0 ] && tools=(memcheck racecheck initcheck synccheck)
status=0
for tool in "${tools[@]}"; do
    echo "== compute-sanitizer --tool $tool"
    # torch's caching allocator hides out-of-bounds accesses inside its pools: turn it off.
    SANITIZE_TOOL=$tool PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool "$tool" --error-exitcode 17 \
        --target-processes all python3 tests/sanitize_cases.py > "/tmp/sanitize_$tool.log" 2>&1
    rc=$?
    grep -E "ERROR SUMMARY|FAIL|Error" "/tmp/sanitize_$tool.log" | tail -5
    if [ $rc -ne 0 ]; then
        echo "-> $tool: exit $rc (see /tmp/sanitize_$tool.log)"; tail -30 "/tmp/sanitize_$tool.log"; status=1
    else
        echo "-> $tool: clean"
    fi
done
exit $status
