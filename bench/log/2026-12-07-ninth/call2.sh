# Call 2 (device tool, carry [".peers/fa4a"], right after call 1 on the same machine): FA4's first half
# stashed; causal windows of 128-512 keys at d = 128 on each grid, in turn (tools.sm90.grids --windows
# 128 --short: auto, one CTA per tile, the persistent snake, the counter walk, the same tokens packed).
set -u
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
bash .peers/fa4a/peers.sh stash > $OUT/stash.txt 2>&1
python3 -c "import torch_flashattn" 2>/dev/null || { MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1; echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt; }
timeout $(( 560 - $(date +%s) + t0 )) python3 -m tools.sm90.grids --windows 128 --short --rounds 2 > $OUT/short128.txt 2>&1
echo "grids rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
cat $OUT/stash.txt $OUT/times.txt; tail -11 $OUT/short128.txt
