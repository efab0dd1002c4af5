# Call 4 (device tool, carry [".peers/fa4b"], after call 3 on the same machine): FA4 installed;
# bench.variants on the causal window points at d = 64 (H = 32) and d = 128 (H = 16), FA4 beside ours
# (the package built in call 1).
set -u
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
source .peers/fa4b/peers.sh install-fa4 > $OUT/fa4_install.txt 2>&1
echo "fa4 rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
python3 -c "import torch_flashattn" 2>/dev/null || { MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1; echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt; }
timeout $(( 400 - $(date +%s) + t0 )) python3 -m bench.variants --d 64 --H 32 --only sliding --out $OUT/variants_d64 > $OUT/variants_d64.log 2>&1
echo "d64 rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
timeout $(( 580 - $(date +%s) + t0 )) python3 -m bench.variants --d 128 --H 16 --only sliding --out $OUT/variants_d128 > $OUT/variants_d128.log 2>&1
echo "d128 rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
cat $OUT/times.txt; cat $OUT/variants_d64.md 2>/dev/null | tail -7; cat $OUT/variants_d128.md 2>/dev/null | tail -6
