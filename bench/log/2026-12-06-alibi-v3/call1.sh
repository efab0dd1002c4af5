#!/usr/bin/env bash
# Call 1: next.diff (alibi_plain_exact and the sinks review's mends) applied to the tree, built for every
# arch; the ALiBi / alignment / sinks tests (with the tail-key, negative-slope, large-logit and huge-score tests); ratio.py (dense and ALiBi,
# 3 rounds); the plain tiles' sanitizer cases (SANITIZE_ONLY=extra) under memcheck; then the whole
# suite in the time left (a second call on the warm machine: `bash tests/gpu.sh`, and ratio.py again).
set -uo pipefail
t0=$(date +%s); export MAX_JOBS=16
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
D=bench/log/2026-12-06-alibi-plain
git apply $D/next.diff || { echo "patch does not apply"; exit 1; }
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1; echo "build rc $? $(( $(date +%s) - t0 )) s"
export OMP_NUM_THREADS=1
timeout $(left 330) python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests/test_sm90.py tests/test_variants.py \
  -k "alibi or alignment or sinks or huge_scores" > $OUT/tests.txt 2>&1; echo "tests rc $? $(( $(date +%s) - t0 )) s"
grep -E "^FAILED|^ERROR" $OUT/tests.txt | head -10; tail -1 $OUT/tests.txt
R=bench/log/2026-12-06-sinks-alibi
WHO=dense,alibi PYTHONPATH=$PWD timeout $(left 360) python3 $R/ratio.py exact 3 > $OUT/ratio.jsonl 2> $OUT/ratio.err; echo "ratio rc $? $(( $(date +%s) - t0 )) s"
python3 $R/summary.py $OUT/ratio.jsonl | tee $OUT/summary.txt; tail -3 $OUT/ratio.err
SANITIZE_ONLY=extra timeout $(left 420) bash tests/sanitize.sh memcheck > $OUT/sanitize.txt 2>&1; echo "sanitize rc $? $(( $(date +%s) - t0 )) s"
grep -E "clean|exit|FAIL" $OUT/sanitize.txt | head
[ $(left 590) -gt 280 ] && timeout $(left 590) bash tests/gpu.sh > $OUT/suite.txt 2>&1; echo "suite rc $? $(( $(date +%s) - t0 )) s"
grep -E "^FAILED|^ERROR" $OUT/suite.txt | head; grep -E "passed|failed" $OUT/suite.txt | tail -3
