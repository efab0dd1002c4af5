#!/usr/bin/env bash
# Call 3 (H200, warm): carries .peers/fa4b. FA4 installed (its first half stashed in call 1), FA3 from
# call 2 on the path; then the variants table (bench.variants, providers in turn) and the peers grid
# (bench.attention, bf16, FlashAttention's grid) with FA3 and FA4, on this tree's build.
set -uo pipefail
t0=$(date +%s)
source .peers/fa4b/peers.sh install-fa4 > $OUT/fa4.txt 2>&1; tail -1 $OUT/fa4.txt
export PYTHONPATH=$PWD:/tmp/fa-peers-fa3:$PYTHONPATH
python3 -c "import fa3_fwd_interface, flash_attn.cute.interface; print('peers importable')"
timeout 280 python3 -m bench.variants --out $OUT/variants > $OUT/variants.log 2>&1; echo "variants rc $?"
echo "variants: $(( $(date +%s) - t0 )) s"
timeout $(( 560 - ($(date +%s) - t0) )) python3 -m bench.attention --preset gpu --dtype bf16 --d 64 128 256 \
  --n 512 1024 2048 4096 8192 16384 --providers fa fa3 fa4 sdpa-cudnn sdpa-flash --out $OUT/gpu_peers > $OUT/gpu_peers.log 2>&1
echo "gpu_peers rc $?"
tail -25 $OUT/variants.log
echo "call: $(( $(date +%s) - t0 )) s"
