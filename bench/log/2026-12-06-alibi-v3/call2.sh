#!/usr/bin/env bash
# Call 2: the tree as it is (ALiBi v3, the sinks mend, the decode kernels' NaN rows, integer ALiBi
# distances and scaled-after-the-product fp32 kernels), built for every arch; where huge scores
# start to give wrong rows (score_limit.py); ALiBi against dense and against the variant kernel in
# one process (ratio.py, 3 rounds); the whole suite; the decode cases under memcheck in the time left.
set -uo pipefail
t0=$(date +%s); export MAX_JOBS=16
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
D=bench/log/2026-12-06-alibi-v3
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1; echo "build rc $? $(( $(date +%s) - t0 )) s"
export OMP_NUM_THREADS=1
PYTHONPATH=$PWD timeout 60 python3 $D/score_limit.py > $OUT/score_limit.txt 2>&1; echo "score_limit rc $? $(( $(date +%s) - t0 )) s"
WHO=dense,alibi,alibi_var PYTHONPATH=$PWD timeout 90 python3 $D/ratio.py call2 3 > $OUT/ratio.jsonl 2> $OUT/ratio.err; echo "ratio rc $? $(( $(date +%s) - t0 )) s"
python3 $D/summary.py $OUT/ratio.jsonl | tee $OUT/summary.txt; tail -3 $OUT/ratio.err
timeout $(left 540) bash tests/gpu.sh > $OUT/suite.txt 2>&1; echo "suite rc $? $(( $(date +%s) - t0 )) s"
grep -E "^FAILED|^ERROR" $OUT/suite.txt | head -20; grep -E "passed|failed" $OUT/suite.txt | tail -3
[ $(left 590) -gt 30 ] && SANITIZE_ONLY=kvcache timeout $(left 590) bash tests/sanitize.sh memcheck > $OUT/sanitize.txt 2>&1; echo "sanitize rc $? $(( $(date +%s) - t0 )) s"
grep -E "clean|exit|FAIL" $OUT/sanitize.txt | head
cat $OUT/score_limit.txt
