# Call 1 (device tool, carry [".peers/fa3", "build/ct", "build/ab2"]; build/ct: base.so, vskip.so, sm90.cu built on
# the development machine by tools/sm90/cap_tune --build-only with no define / FA_SM90_VAR_SKIP=2).
# The package is built with tiles.h's FA_SM90_VAR_SKIP default set to 2 (tree.txt), so that the
# whole suite runs the variant kernels with the skip on. CAP: the seconds the whole call may take.
set -u
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
sed -i 's/^#define FA_SM90_VAR_SKIP 0$/#define FA_SM90_VAR_SKIP 2/' csrc/cuda/tiles.h
git log --oneline -1 > $OUT/tree.txt; git diff >> $OUT/tree.txt
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3_install.txt 2>&1
t0=$(date +%s)
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
BUILD=$PWD/build/ct timeout 100 python3 -m tools.sm90.cap_tune --prebuilt --variants base= vskip=FA_SM90_VAR_SKIP=2 --set var --rounds 1 > $OUT/var1.txt 2>&1
echo "var rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
OMP_NUM_THREADS=1 FA_FAILURES=$OUT/failures.txt timeout $(( ${CAP:-560} - $(date +%s) + t0 )) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
