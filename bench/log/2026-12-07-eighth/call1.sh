# Call 1 (device tool, no carry): the package built from the tree (117da15 with the sm90_short_tile
# override: d = 64 calls forced onto either tile; the automatic rule unchanged); the new tile test;
# the whole suite (tests/gpu.sh: every test on 16 workers, then the cases past 2^31 elements one at
# a time).
set -u
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
git log --oneline -1 > $OUT/tree.txt; git status --short >> $OUT/tree.txt
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
OMP_NUM_THREADS=1 FA_FAILURES=$OUT/failures.txt timeout $(( 595 - $(date +%s) + t0 )) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
cat $OUT/times.txt; tail -4 $OUT/suite.txt; head $OUT/failures.txt 2>/dev/null
