# Call 3 (device tool, carry [".peers/fa4b"], right after call 2): FA4 installed; the whole variants table
# (bench.variants, bf16, d = 128, H = 16, providers timed call by call in turn) with FA3 (installed in
# call 1) and FA4 beside ours; the package built in call 1.
set -u
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
source .peers/fa4b/peers.sh install-fa4 > $OUT/fa4_install.txt 2>&1
echo "fa4 rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
export PYTHONPATH=$PWD:/tmp/fa-peers-fa3:/tmp/fa-peers-fa4:/tmp/fa-peers-fa4/nvidia_cutlass_dsl/dsl_packages:${PYTHONPATH:-}
python3 -c "import fa3_fwd_interface, flash_attn.cute.interface; print('fa3 and fa4 importable')" >> $OUT/times.txt 2>&1
python3 -c "import torch_flashattn" 2>/dev/null || { MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1; echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt; }
timeout $(( 585 - $(date +%s) + t0 )) python3 -m bench.variants --out $OUT/variants > $OUT/variants.log 2>&1
echo "variants rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
cat $OUT/times.txt; tail -22 $OUT/variants.log
