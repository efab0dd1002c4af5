#!/usr/bin/env bash
set -uo pipefail
export MAX_JOBS=16 FA_CUDA_ARCHS=90a
t0=$(date +%s)
python3 setup.py build_ext --inplace > $OUT/build.log 2>&1 || { tail -40 $OUT/build.log; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s" | tee $OUT/summary.txt
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
timeout 80 python3 bench/log/2026-12-04-sections/variants_order.py call6 0.3 > $OUT/variants_order_call6.jsonl 2> $OUT/err.txt
echo "run rc $?: $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
cat $OUT/variants_order_call6.jsonl; tail -3 $OUT/err.txt
