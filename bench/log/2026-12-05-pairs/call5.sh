#!/usr/bin/env bash
# Third device call: the automatic rule with pairs (d = 128 causal, 2049-8192 keys): the build, the
# whole suite, then grid_ab.py's shapes with the automatic grid beside the three forced ones.
set -uo pipefail
t0=$(date +%s)
L=bench/log/2026-12-05-pairs
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
MAX_JOBS=16 python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo "build rc $?" | tee -a $OUT/build.log
echo "build: $(( $(date +%s) - t0 )) s"
timeout 360 bash tests/gpu.sh > $OUT/suite.log 2>&1; echo "suite rc $?"
grep -E "passed|failed" $OUT/suite.log | tail -n 4
echo "suite: $(( $(date +%s) - t0 )) s"
GRIDS=auto,tile,pairs timeout $(( 585 - ($(date +%s) - t0) )) python3 $L/grid_ab.py 3 > $OUT/grid_ab.jsonl 2> $OUT/grid_ab.err; echo "ab rc $?"
tail -n 2 $OUT/grid_ab.err
python3 $L/grid_sum.py $OUT/grid_ab.jsonl
echo "call: $(( $(date +%s) - t0 )) s"
