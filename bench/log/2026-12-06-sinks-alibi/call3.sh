#!/usr/bin/env bash
# On the machine call2.sh left warm (f22357f built in place): the editable install, the whole suite
# (tests/gpu.sh), then compute-sanitizer memcheck on the Hopper tests.
t0=$(date +%s); export MAX_JOBS=16
python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1; echo "build rc $? $(( $(date +%s) - t0 )) s"
timeout 330 bash tests/gpu.sh > $OUT/suite.txt 2>&1; echo "suite rc $?"
grep -E "^FAILED|^ERROR" $OUT/suite.txt | head; grep -E "passed|failed" $OUT/suite.txt | tail -3
SANITIZE_ONLY=sm90 timeout $(( 580 - ($(date +%s) - t0) )) bash tests/sanitize.sh memcheck > $OUT/san_memcheck.txt 2>&1; echo "memcheck rc $?"
tail -4 $OUT/san_memcheck.txt
