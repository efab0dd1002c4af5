#!/usr/bin/env bash
# The packed walk's order: each head's tiles together (default) against groups of 4 and 16
# heads walked rank by rank (FA_SM90_PACKED_HEADS), beside FA3's varlen, sm_90a builds only.
set -uo pipefail
export MAX_JOBS=16 FA_CUDA_ARCHS=90a
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3.log 2>&1
t0=$(date +%s)
for g in 4 16; do
  rm -rf /tmp/g$g && mkdir -p /tmp/g$g && cp -r csrc setup.py pyproject.toml torch_flashattn /tmp/g$g/
  sed -i "s|#define FA_SM90_PACKED_HEADS 1|#define FA_SM90_PACKED_HEADS $g|" /tmp/g$g/csrc/cuda/tiles.h
  (cd /tmp/g$g && python3 setup.py build_ext --inplace > /tmp/g$g.log 2>&1) &
done
python3 setup.py build_ext --inplace > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
wait
echo "builds: $(( $(date +%s) - t0 )) s" | tee $OUT/summary.txt
grep -c PACKED_HEADS /tmp/g4/csrc/cuda/tiles.h /tmp/g16/csrc/cuda/tiles.h >> $OUT/summary.txt
W=$PWD/bench/log/2026-12-04-packed-dynamic/walks.py   # run from the repository root, OUT set
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
timeout 60 python3 $W heads1 0.25 auto > $OUT/order.jsonl 2>>$OUT/order.err
for g in 4 16; do
  PYTHONPATH=/tmp/g$g:$PYTHONPATH timeout 60 python3 $W heads$g 0.25 auto >> $OUT/order.jsonl 2>>$OUT/order.err
done
echo "walks: $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
