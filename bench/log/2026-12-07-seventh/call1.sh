# Call 1 (device tool, carry ["build/s7"]): the package built from the tree at 088627b (causal windows
# at d <= 64 on the packed walk, fa_plan_sm90_counter); the tests that touch the walks first; the
# whole suite; then the window grids at d = 64 (auto, tile, persistent, counter forced, and the same
# tokens as packed sequences), three rounds in turn; cap_tune --set var on build/s7's libraries (base:
# e2340fa's sm90.cu, the window rule; counter: 088627b's), two rounds; SANITIZE_ONLY=counter
# under memcheck, racecheck and synccheck; the d = 128 window grids.
set -u
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
git log --oneline -1 > $OUT/tree.txt; git status --short >> $OUT/tree.txt
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
OMP_NUM_THREADS=1 timeout 90 python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests/test_variants_kernel.py -k "packed_walk or every_hopper_grid or which_calls" > $OUT/targeted.txt 2>&1
echo "targeted rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
OMP_NUM_THREADS=1 FA_FAILURES=$OUT/failures.txt timeout $(( 420 - $(date +%s) + t0 )) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
timeout $(( 540 - $(date +%s) + t0 )) python3 -m tools.sm90.grids --windows 64 --rounds 2 > $OUT/windows64.txt 2>&1
echo "windows 64 rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
BUILD=$PWD/build/s7 timeout $(( 590 - $(date +%s) + t0 )) python3 -m tools.sm90.cap_tune --prebuilt --variants base= counter= --set var --rounds 1 > $OUT/var.txt 2>&1
echo "var rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
SANITIZE_ONLY=counter timeout $(( 590 - $(date +%s) + t0 )) bash tests/sanitize.sh memcheck racecheck synccheck > $OUT/sanitize.txt 2>&1
echo "sanitize rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
timeout $(( 590 - $(date +%s) + t0 )) python3 -m tools.sm90.grids --windows 128 --rounds 3 > $OUT/windows128.txt 2>&1
echo "windows 128 rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
cat $OUT/times.txt; tail -3 $OUT/targeted.txt; tail -4 $OUT/suite.txt; head $OUT/failures.txt 2>/dev/null; grep -v '^{' $OUT/windows64.txt | tail -10; grep -v '^{' $OUT/var.txt | tail -16; tail -5 $OUT/sanitize.txt
