# Call 2 (device tool, carry [".peers/fa3", "build/s4"]): causal windows on the persistent grid walked
# as a snake (base, forced persistent), rotated by one CTA a pass (rotate: FA_SM90_WINDOW_ROTATE=1),
# one CTA per tile (forced tile) and the plan's own choice; build/s4 = both libraries built at HEAD.
set -u
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3_install.txt 2>&1
for r in 1 2; do
BUILD=$PWD/build/s4 timeout 250 python3 -m tools.sm90.cap_tune --prebuilt --variants base= rotate=FA_SM90_WINDOW_ROTATE=1 --set var --grids tile persistent --rounds 2 > $OUT/rotate$r.txt 2>&1
echo "rotate$r rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
done
cat $OUT/times.txt; for r in 1 2; do grep -v '^{' $OUT/rotate$r.txt | tail -16; done
