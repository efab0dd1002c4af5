# Call 3, NOT RUN (no machine could be started; the refusal took 211 s of device time). (device tool, carry [".peers/fa3", "build/s5"]): the package built with the rotated walk taken
# (fa_plan_sm90_window_walk picks snake, rotated or one CTA per tile); --set var with the libraries
# before (base = build/s4/base.so, main at c22f17e) and after (walk); then the whole suite.
set -u
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
git log --oneline -1 > $OUT/tree.txt; git status --short >> $OUT/tree.txt
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3_install.txt 2>&1
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
BUILD=$PWD/build/s5 timeout 120 python3 -m tools.sm90.cap_tune --prebuilt --variants base= walk= --set var --rounds 2 > $OUT/var.txt 2>&1
echo "var rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
OMP_NUM_THREADS=1 FA_FAILURES=$OUT/failures.txt timeout $(( 555 - $(date +%s) + t0 )) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
cat $OUT/times.txt; grep -v '^{' $OUT/var.txt | tail -15; tail -3 $OUT/suite.txt; head -20 $OUT/failures.txt 2>/dev/null
