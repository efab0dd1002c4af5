# Call 1 (device tool, carry [".peers/fa3"]): FA3's wheel stashed for a later call on the same machine;
# the package built from the tree (HEAD); causal windows of 128-512 keys at d = 128 on each grid, in turn
# (tools.sm90.grids --windows 128 --short); the whole suite (tests/gpu.sh); the CPU's vector extensions.
set -u
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
grep -o 'avx512[a-z]*' /proc/cpuinfo | sort -u | tr '\n' ' ' > $OUT/cpu.txt; lscpu | grep 'Model name' >> $OUT/cpu.txt
mkdir -p $HOME/.fa-peers-fa3 && cp .peers/fa3/* $HOME/.fa-peers-fa3/
git log --oneline -1 > $OUT/tree.txt; git status --short >> $OUT/tree.txt
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
timeout 150 python3 -m tools.sm90.grids --windows 128 --short --rounds 2 > $OUT/short128.txt 2>&1
echo "grids rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
OMP_NUM_THREADS=1 FA_FAILURES=$OUT/failures.txt timeout $(( 590 - $(date +%s) + t0 )) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
cat $OUT/gpu.txt $OUT/cpu.txt; cat $OUT/times.txt; tail -11 $OUT/short128.txt; tail -4 $OUT/suite.txt; head $OUT/failures.txt 2>/dev/null
