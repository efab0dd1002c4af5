#!/usr/bin/env bash
# Call 5: base (2e2a0f3) and this tree, sm_90a, side by side; the plain calls in turn, processes alternating.
set -uo pipefail
export MAX_JOBS=16 FA_CUDA_ARCHS=90a
t0=$(date +%s)
rm -rf /tmp/ab_base && mkdir -p /tmp/ab_base && tar -xf _dev2/base.tar -C /tmp/ab_base
(cd /tmp/ab_base && python3 setup.py build_ext --inplace > $OUT/base_build.log 2>&1) &
python3 setup.py build_ext --inplace > $OUT/build.log 2>&1 || { tail -40 $OUT/build.log; exit 1; }
wait
echo "builds: $(( $(date +%s) - t0 )) s" | tee $OUT/summary.txt
for r in 1 2 3 4; do
  [ $(( $(date +%s) - t0 )) -gt 330 ] && break
  PYTHONPATH=/tmp/ab_base:$PWD timeout 40 python3 bench/log/2026-12-04-sections/ab_plain.py base$r >> $OUT/ab_plain_call5.jsonl 2>> $OUT/err.txt
  PYTHONPATH=$PWD timeout 40 python3 bench/log/2026-12-04-sections/ab_plain.py new$r >> $OUT/ab_plain_call5.jsonl 2>> $OUT/err.txt
done
echo "ab: $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
tail -3 $OUT/err.txt
