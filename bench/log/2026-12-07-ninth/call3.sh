# Call 3 (device tool, carry [".peers/fa4b"], right after call 2 on the same machine): FA4 installed
# (its first half stashed in call 2), FA3 (stashed in call 1); the variants table (bench.variants,
# bf16, d = 128, H = 16, providers call by call in turn).
set -u
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
source .peers/fa4b/peers.sh install-fa4 > $OUT/fa4.txt 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/fa-peers-fa3 $HOME/.fa-peers-fa3/fa3_fwd-*.whl >> $OUT/fa4.txt 2>&1
export PYTHONPATH=$PWD:/tmp/fa-peers-fa3:/tmp/fa-peers-fa4:/tmp/fa-peers-fa4/nvidia_cutlass_dsl/dsl_packages:${PYTHONPATH:-}
python3 -c "import fa3_fwd_interface, flash_attn.cute.interface; print('peers importable')" >> $OUT/fa4.txt 2>&1
python3 -c "import torch_flashattn" 2>/dev/null || { MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1; echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt; }
timeout $(( 585 - $(date +%s) + t0 )) python3 -m bench.variants --out $OUT/variants > $OUT/variants.log 2>&1
echo "variants rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
tail -2 $OUT/fa4.txt; cat $OUT/times.txt; tail -17 $OUT/variants.md 2>/dev/null || tail -20 $OUT/variants.log
