#!/usr/bin/env bash
# One call (carries .peers/fa3): this tree built in place (editable install), the whole suite
# (tests/gpu.sh), then the bf16 peers grid (FlashAttention's grid) beside FlashAttention-3 and SDPA's
# cuDNN and flash backends, as far as the call's time allows.
set -uo pipefail
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3.txt 2>&1; tail -1 $OUT/fa3.txt
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1; echo "build rc $?" >> $OUT/build.log
tail -n1 $OUT/build.log
echo "build: $(( $(date +%s) - t0 )) s"
timeout 300 bash tests/gpu.sh > $OUT/suite.txt 2>&1; echo "suite rc $?" >> $OUT/suite.txt
grep -E "^FAILED|^ERROR" $OUT/suite.txt | head -20
grep -E "passed|failed|suite rc" $OUT/suite.txt | tail -3
echo "suite: $(( $(date +%s) - t0 )) s"
export PYTHONPATH=$PWD:/tmp/fa-peers-fa3:${PYTHONPATH:-}
timeout $(( 585 - ($(date +%s) - t0) )) python3 -m bench.attention --preset gpu --dtype bf16 --d 64 128 256 \
  --n 512 1024 2048 4096 8192 16384 --providers fa fa3 sdpa-cudnn sdpa-flash --out $OUT/gpu_peers > $OUT/gpu_peers.log 2>&1
echo "gpu_peers rc $?"
tail -4 $OUT/gpu_peers.log
echo "call: $(( $(date +%s) - t0 )) s"
