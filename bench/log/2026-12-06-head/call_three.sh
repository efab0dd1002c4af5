#!/usr/bin/env bash
# Third call on the same warm machine (FA3 under /tmp, this tree built): the bf16 peers grid again (its
# second call), the same grid with the providers timed in turn, the fp16 grid (FA3's wheel has no fp16),
# then the backward grid beside SDPA's backends, as far as the call's time allows.
set -uo pipefail
t0=$(date +%s)
export PYTHONPATH=$PWD:/tmp/fa-peers-fa3:${PYTHONPATH:-}
G="--preset gpu --d 64 128 256 --n 512 1024 2048 4096 8192 16384"
timeout 150 python3 -m bench.attention $G --dtype bf16 --providers fa fa3 sdpa-cudnn sdpa-flash --out $OUT/gpu_peers_r2 > $OUT/gpu_peers_r2.log 2>&1; echo "r2 rc $?"
timeout 200 python3 -m bench.attention $G --dtype bf16 --providers fa fa3 sdpa-cudnn sdpa-flash --in-turn --out $OUT/gpu_peers_inturn > $OUT/gpu_peers_inturn.log 2>&1; echo "in-turn rc $?"
timeout 150 python3 -m bench.attention $G --dtype fp16 --providers fa sdpa-cudnn sdpa-flash --out $OUT/gpu_fp16 > $OUT/gpu_fp16.log 2>&1; echo "fp16 rc $?"
echo "grids: $(( $(date +%s) - t0 )) s"
timeout $(( 560 - ($(date +%s) - t0) )) python3 -m bench.backward --out $OUT/backward > $OUT/backward.log 2>&1; echo "backward rc $?"
grep -h "geometric mean" $OUT/*.md | head -20
echo "call: $(( $(date +%s) - t0 )) s"
