#!/usr/bin/env bash
# Call 2: as call1.sh, the one-sided blocks' terms one fused multiply-add per score, the huge-slope test within the
# scores' range; built for every arch; its ALiBi / alignment / sinks tests; ratio.py (dense and ALiBi, 3 rounds);
# then, if those tests passed, the whole suite (tests/gpu.sh) in the time left.
set -uo pipefail
t0=$(date +%s); export MAX_JOBS=16
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1; echo "build rc $? $(( $(date +%s) - t0 )) s"
export OMP_NUM_THREADS=1
timeout $(left 260) python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests/test_sm90.py tests/test_variants.py \
  -k "alibi or alignment or sinks" > $OUT/tests.txt 2>&1; trc=$?; echo "tests rc $trc $(( $(date +%s) - t0 )) s"
grep -E "^FAILED|^ERROR" $OUT/tests.txt | head -10; tail -1 $OUT/tests.txt
R=bench/log/2026-12-06-sinks-alibi
WHO=dense,alibi PYTHONPATH=$PWD timeout $(left 340) python3 $R/ratio.py call2 3 > $OUT/ratio.jsonl 2> $OUT/ratio.err; echo "ratio rc $? $(( $(date +%s) - t0 )) s"
python3 $R/summary.py $OUT/ratio.jsonl | tee $OUT/summary.txt; tail -3 $OUT/ratio.err
if [ $trc = 0 ]; then
  timeout $(left 560) bash tests/gpu.sh > $OUT/suite.txt 2>&1; echo "suite rc $? $(( $(date +%s) - t0 )) s"
  grep -E "^FAILED|^ERROR" $OUT/suite.txt | head; grep -E "passed|failed" $OUT/suite.txt | tail -3
fi
if [ $(left 590) -gt 25 ]; then
  WHO=dense,alibi PYTHONPATH=$PWD timeout $(left 590) python3 $R/ratio.py call2b 3 >> $OUT/ratio.jsonl 2>> $OUT/ratio.err; echo "ratio b rc $?"
  python3 $R/summary.py $OUT/ratio.jsonl | tee $OUT/summary.txt
fi
