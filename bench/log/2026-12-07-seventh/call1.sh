# Call 1 (device tool, no carry): the package built from the working tree (causal windows at
# d <= 64 on the packed walk, fa_plan_sm90_counter); the tests that touch the walks first; the whole
# suite; then the window grids at d = 64 and 128 (auto, tile, persistent, counter forced, and the
# same tokens as packed sequences), three rounds in turn.
set -u
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
git log --oneline -1 > $OUT/tree.txt; git status --short >> $OUT/tree.txt
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
OMP_NUM_THREADS=1 timeout 90 python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests/test_variants_kernel.py -k "packed_walk or every_hopper_grid or which_calls" > $OUT/targeted.txt 2>&1
echo "targeted rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
OMP_NUM_THREADS=1 FA_FAILURES=$OUT/failures.txt timeout $(( 480 - $(date +%s) + t0 )) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
for D in 64 128; do
  timeout $(( 590 - $(date +%s) + t0 )) python3 -m tools.sm90.grids --windows $D --rounds 3 > $OUT/windows$D.txt 2>&1
  echo "windows $D rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
done
cat $OUT/times.txt; tail -3 $OUT/targeted.txt; tail -4 $OUT/suite.txt; head $OUT/failures.txt 2>/dev/null; grep -v '^{' $OUT/windows*.txt | tail -24
