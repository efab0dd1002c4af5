#!/usr/bin/env bash
# Call 4 (carries .peers/fa3, the machine call 3 left warm): FA3 installed under /tmp; the bf16 peers
# grid (FlashAttention's grid) beside FA3 and SDPA's cuDNN backend, as far as 150 s allow.
set -uo pipefail
t0=$(date +%s)
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3.txt 2>&1; tail -1 $OUT/fa3.txt
export PYTHONPATH=$PWD:/tmp/fa-peers-fa3:${PYTHONPATH:-}
timeout 150 python3 -m bench.attention --preset gpu --dtype bf16 --d 64 128 256 --n 512 1024 2048 4096 8192 16384 \
  --providers fa fa3 sdpa-cudnn --out $OUT/gpu_peers > $OUT/gpu_peers.log 2>&1; echo "gpu_peers rc $?"
grep "geometric mean" $OUT/gpu_peers.md
echo "call: $(( $(date +%s) - t0 )) s"
