# Call 1 (device tool): the package built at the landed tree; the gcc on the host and whether its tuning
# keeps the FMA at 8 and 16 floats (fmachain.c, without and with --param=avoid-fma-max-bits=0); the
# lane-width test first; the whole suite (tests/gpu.sh, failing ids appended to $OUT/failures.txt);
# then, in the time left of LIMIT seconds, grid_probe.py: issue 35's long causal calls on each grid and
# on the counter walk, beside FlashAttention-3 (carry .peers/fa3).
#   LIMIT=560 bash call1.sh
set -u
t0=$(date +%s)
LIMIT=${LIMIT:-560}
left() { echo $(( LIMIT - $(date +%s) + t0 )); }
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
lscpu | grep -E "Model name" >> $OUT/gpu.txt; grep -q avx512f /proc/cpuinfo && echo "avx512f present" >> $OUT/gpu.txt
gcc --version | head -1 >> $OUT/gpu.txt
for p in "" "--param=avoid-fma-max-bits=0"; do
  echo "== fmachain.c $p" >> $OUT/gcc.txt
  gcc -O3 -ffp-contract=fast $p -S -o - bench/log/2026-12-07-eleventh/fmachain.c | grep -E "^dot|vfmadd|vmulps|vaddps" >> $OUT/gcc.txt
done
git log --oneline -1 > $OUT/tree.txt; git status --short >> $OUT/tree.txt
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_variants.py -k lane_widths > $OUT/lanes.txt 2>&1
echo "lanes rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
FA_FAILURES=$OUT/failures.txt timeout $(( $(left) - 70 )) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
if [ $(left) -gt 40 ]; then
  source .peers/fa3/peers.sh install-fa3 > $OUT/fa3.txt 2>&1
  PYTHONPATH=$PWD:${PYTHONPATH:-} timeout $(( $(left) - 5 )) python3 bench/log/2026-12-08-first/grid_probe.py 2 > $OUT/grid_probe.txt 2>&1
  echo "probe rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
fi
cat $OUT/gpu.txt $OUT/gcc.txt $OUT/times.txt; tail -3 $OUT/lanes.txt; tail -3 $OUT/suite.txt; cat $OUT/grid_probe.txt 2>/dev/null
