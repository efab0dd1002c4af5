#!/usr/bin/env bash
# Call 3 (the machine call 2 left warm): fp32tc declining |scale · log2 e| > 1 rebuilt; ALiBi against
# dense and the variant kernel again (ratio.py, a second process); the whole suite.
set -uo pipefail
t0=$(date +%s); export MAX_JOBS=16
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
D=bench/log/2026-12-06-alibi-v3
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1; echo "build rc $? $(( $(date +%s) - t0 )) s"
export OMP_NUM_THREADS=1
WHO=dense,alibi,alibi_var PYTHONPATH=$PWD timeout 90 python3 $D/ratio.py call3 3 > $OUT/ratio.jsonl 2> $OUT/ratio.err; echo "ratio rc $? $(( $(date +%s) - t0 )) s"
python3 $D/summary.py $OUT/ratio.jsonl | tee $OUT/summary.txt; tail -3 $OUT/ratio.err
timeout $(left 560) bash tests/gpu.sh > $OUT/suite.txt 2>&1; echo "suite rc $? $(( $(date +%s) - t0 )) s"
grep -E "^FAILED|^ERROR" $OUT/suite.txt | head -20; grep -E "passed|failed" $OUT/suite.txt | tail -3
