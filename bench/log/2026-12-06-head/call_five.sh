#!/usr/bin/env bash
# Fifth call, same warm machine: the fp16 grid's second call beside SDPA's cuDNN and flash backends.
timeout 150 python3 -m bench.attention --preset gpu --d 64 128 256 --n 512 1024 2048 4096 8192 16384 --dtype fp16 \
  --providers fa sdpa-cudnn sdpa-flash --out $OUT/gpu_fp16_r2 > $OUT/fp16r2.log 2>&1; echo rc $?
grep "geometric mean" $OUT/gpu_fp16_r2.md
