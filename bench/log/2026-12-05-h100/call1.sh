#!/usr/bin/env bash
# Call 1 (H200): carries .peers/fa4a and _dev/base.tar (c5da529's sources: main before this session).
# FA4's first half stashed for call 3; this tree pip-installed (editable) and c5da529 built in place in
# /tmp/base side by side; then the whole suite (tests/gpu.sh) on this tree.
set -uo pipefail
t0=$(date +%s)
bash .peers/fa4a/peers.sh stash > $OUT/stash.txt 2>&1
rm -rf /tmp/base && mkdir /tmp/base && tar -xf _dev/base.tar -C /tmp/base
(cd /tmp/base && MAX_JOBS=6 python3 setup.py build_ext --inplace > $OUT/build_base.log 2>&1; echo "base build rc $?" >> $OUT/build_base.log) &
MAX_JOBS=10 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1; echo "build rc $?" >> $OUT/build.log
wait
tail -n1 $OUT/build.log $OUT/build_base.log
echo "builds: $(( $(date +%s) - t0 )) s"
timeout 420 bash tests/gpu.sh > $OUT/suite.txt 2>&1; echo "suite rc $?" >> $OUT/suite.txt
grep -E "^FAILED|^ERROR" $OUT/suite.txt | head -20
grep -E "passed|failed|suite rc" $OUT/suite.txt | tail -3
echo "call: $(( $(date +%s) - t0 )) s"
