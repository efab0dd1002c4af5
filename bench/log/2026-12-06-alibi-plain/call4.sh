#!/usr/bin/env bash
# Call 4: lse's ALiBi term in natural units; built for every arch; the ALiBi / alignment / sinks
# tests; ratio.py (dense and ALiBi, 3 rounds); then the plain tiles' sinks / ALiBi sanitizer cases
# (SANITIZE_ONLY=extra) under memcheck and racecheck, each step under a deadline (520 s in all).
set -uo pipefail
t0=$(date +%s); export MAX_JOBS=16
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1; echo "build rc $? $(( $(date +%s) - t0 )) s"
export OMP_NUM_THREADS=1
timeout $(left 330) python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests/test_sm90.py tests/test_variants.py \
  -k "alibi or alignment or sinks" > $OUT/tests.txt 2>&1; echo "tests rc $? $(( $(date +%s) - t0 )) s"
grep -E "^FAILED|^ERROR" $OUT/tests.txt | head -10; tail -1 $OUT/tests.txt
R=bench/log/2026-12-06-sinks-alibi
WHO=dense,alibi PYTHONPATH=$PWD timeout $(left 360) python3 $R/ratio.py call4 3 > $OUT/ratio.jsonl 2> $OUT/ratio.err; echo "ratio rc $? $(( $(date +%s) - t0 )) s"
python3 $R/summary.py $OUT/ratio.jsonl | tee $OUT/summary.txt; tail -3 $OUT/ratio.err
SANITIZE_ONLY=extra timeout $(left 520) bash tests/sanitize.sh memcheck racecheck > $OUT/sanitize.txt 2>&1; echo "sanitize rc $? $(( $(date +%s) - t0 )) s"
grep -E "clean|exit|FAIL" $OUT/sanitize.txt | head; cp /tmp/sanitize_*.log $OUT/ 2>/dev/null
