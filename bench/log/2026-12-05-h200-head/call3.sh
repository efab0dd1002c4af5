#!/usr/bin/env bash
# Call 3: this tree (88923ef: the binding's slope, sink and scale / softcap checks; e9b8bae: the C
# backward's window-sized score tiles) built in place; first the tests those changes touch (bad input,
# variants, kvcache, backward), then the whole suite (tests/gpu.sh) in what the call has left.
set -uo pipefail
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1; echo "build rc $?" >> $OUT/build.log
tail -n1 $OUT/build.log
echo "build: $(( $(date +%s) - t0 )) s"
OMP_NUM_THREADS=1 timeout ${TOUCHED_S:-150} python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests/test_bad_input.py \
  tests/test_variants.py tests/test_kvcache.py tests/test_backward.py > $OUT/touched.txt 2>&1; echo "touched rc $?" >> $OUT/touched.txt
grep -E "^FAILED|^ERROR" $OUT/touched.txt | head -10; tail -2 $OUT/touched.txt
echo "touched: $(( $(date +%s) - t0 )) s"
left=$(( ${LIMIT:-585} - ($(date +%s) - t0) ))
if [ $left -gt 60 ]; then timeout $left bash tests/gpu.sh > $OUT/suite.txt 2>&1; echo "suite rc $?" >> $OUT/suite.txt
else echo "suite not run: $left s left" > $OUT/suite.txt; fi
grep -E "^FAILED|^ERROR" $OUT/suite.txt | head -20
grep -E "passed|failed|suite rc" $OUT/suite.txt | tail -3
echo "call: $(( $(date +%s) - t0 )) s"
