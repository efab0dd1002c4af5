#!/usr/bin/env bash
# Call 1 (H200): carries .peers/fa4a. FA4's first half stashed for a later call on the same warm
# machine; this tree built in place (editable install); then the whole suite (tests/gpu.sh).
set -uo pipefail
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
bash .peers/fa4a/peers.sh stash > $OUT/stash.txt 2>&1; tail -1 $OUT/stash.txt
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1; echo "build rc $?" >> $OUT/build.log
tail -n1 $OUT/build.log
echo "build: $(( $(date +%s) - t0 )) s"
timeout $(( 585 - ($(date +%s) - t0) )) bash tests/gpu.sh > $OUT/suite.txt 2>&1; echo "suite rc $?" >> $OUT/suite.txt
grep -E "^FAILED|^ERROR" $OUT/suite.txt | head -20
grep -E "passed|failed|suite rc" $OUT/suite.txt | tail -3
echo "call: $(( $(date +%s) - t0 )) s"
