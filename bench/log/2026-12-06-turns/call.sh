#!/usr/bin/env bash
# One device call (600 s): build for sm_90a, the switched-on path's tests (the bits of every issue
# taking a turn, and the accuracy rule), then ratio.py's three rotated rounds with FlashAttention-3
# beside them where .peers/fa3 was carried. Run from the repository root, carry [".peers/fa3"]:
#     bash bench/log/2026-12-06-turns/call.sh
set -uo pipefail
t0=$(date +%s); export MAX_JOBS=16 OMP_NUM_THREADS=1
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
D=bench/log/2026-12-06-turns
# The change itself: applied here unless the tree already has it (the exp/issue35-next branch).
if git apply --check $D/issue35_next.diff 2>/dev/null; then git apply $D/issue35_next.diff
elif ! git apply --reverse --check $D/issue35_next.diff 2>/dev/null; then echo "issue35_next.diff does not apply"; exit 1; fi
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
FA_CUDA_ARCHS=90a python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1
echo "build rc $? $(( $(date +%s) - t0 )) s"; grep -i "spill" $OUT/build.log | grep -v "0 bytes spill" | head -5
PYTHONPATH=$PWD timeout $(left 300) python3 -m pytest -q -p no:cacheprovider -rfE --tb=short tests/test_sm90.py \
    -k "test_sm90_turns or test_sm90_causal_long_tile" > $OUT/tests.txt 2>&1
rc=$?; echo "tests rc $rc $(( $(date +%s) - t0 )) s"; grep -E "passed|failed|^FAILED|^ERROR" $OUT/tests.txt | tail -8
[ $rc -ne 0 ] && { echo "tests failed: no timing"; exit 1; }
[ -d .peers/fa3 ] && source .peers/fa3/peers.sh install-fa3 > $OUT/fa3.txt 2>&1; tail -1 $OUT/fa3.txt 2>/dev/null
PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} timeout $(left 590) python3 $D/ratio.py call1 3 > $OUT/ratio.jsonl 2> $OUT/ratio.err
echo "ratio rc $? $(( $(date +%s) - t0 )) s"; tail -3 $OUT/ratio.err
python3 $D/ratio.py --summary $OUT/ratio.jsonl | tee $OUT/summary.txt
