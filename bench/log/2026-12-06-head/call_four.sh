#!/usr/bin/env bash
# Fourth call, same warm machine (FA3 under /tmp, this tree built): the bf16 peers grid once more (call
# three's copy of it did not come back: a call returns at most 8 files).
export PYTHONPATH=$PWD:/tmp/fa-peers-fa3:${PYTHONPATH:-}
timeout 150 python3 -m bench.attention --preset gpu --d 64 128 256 --n 512 1024 2048 4096 8192 16384 --dtype bf16 \
  --providers fa fa3 sdpa-cudnn sdpa-flash --out $OUT/gpu_peers_r3 > $OUT/r3.log 2>&1; echo rc $?
grep "geometric mean" $OUT/gpu_peers_r3.md
