# Call 2 (device tool, carry [".peers/fa3", "build/s4"]; after call 1 on the same machine, whose
# package build it uses): causal windows on the persistent grid walked as a snake (base, forced
# persistent), rotated by one CTA a pass (rotate: FA_SM90_WINDOW_ROTATE=1), one CTA per tile (forced
# tile) and the plan's own choice (build/s4: both libraries built at HEAD); then tools/sm90/grids
# --windows at d = 64 and 128, with the same tokens as packed sequences (the counter-fed walk) beside.
set -u
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3_install.txt 2>&1
python3 -c "import torch_flashattn" 2>/dev/null || { MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1; echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt; }
BUILD=$PWD/build/s4 timeout 240 python3 -m tools.sm90.cap_tune --prebuilt --variants base= rotate=FA_SM90_WINDOW_ROTATE=1 --set var --grids tile persistent --rounds 2 > $OUT/rotate.txt 2>&1
echo "rotate rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
for dw in 64 128; do timeout 100 python3 -m tools.sm90.grids --windows $dw --rounds 2 > $OUT/grids_d$dw.txt 2>&1; echo "grids d$dw rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt; done
cat $OUT/times.txt; grep -v '^{' $OUT/rotate.txt | tail -16; for dw in 64 128; do tail -8 $OUT/grids_d$dw.txt; done
