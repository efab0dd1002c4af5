#!/usr/bin/env bash
# Prepared, not run: d = 128 non-causal at 2k-4k keys on the 2-consumer tile (its O rescale early since
# 2026-12-04) against the 3-consumer 80-key tile production runs from FA_SM90_LONG_NK = 2048 keys, last
# chosen on 2026-11-30 (2k: 577 against 567 TFLOP/s). tools/sm90/tune.py, one variant library (the
# 2-consumer tile at every length: LONG_NK = 2^40), production "auto" (3c, last round split) and "tail0"
# (3c, no split), SDPA cuDNN beside them, four rotated rounds; the variant checked against SDPA math first.
#     OUT=<dir> bash bench/log/2026-12-06-fifth/next/long_nk.sh     (after the tree is built: ~200 s)
set -uo pipefail
export PYTHONPATH=$PWD TUNE_PROD="auto,tail0" TUNE_VARIANTS="128,128,2,2,1,LONG_NK=1099511627776"
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
timeout 500 python3 -m tools.sm90.tune --d 128 --n 1k 2k 3k 4k 8k --rounds 4 > $OUT/long_nk.txt 2>&1; echo "rc $?"
tail -30 $OUT/long_nk.txt
