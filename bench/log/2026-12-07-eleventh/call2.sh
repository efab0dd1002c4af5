# Call 2 (device tool, CPU only): why the C backend's two vector widths gave other bits on the device's
# AVX-512 CPU (test_cpu_lane_widths_give_the_same_bits, 9 of 15 failed in call 1). The compiler, and
# whether its generic tuning avoids FMA chains at 256 bits (fmachain.c: a reduction on 8 and 16 floats,
# x86-64-v4); then the package built CPU-only with setup.py's --param=avoid-fma-max-bits=0, and the
# test; then the CPU variants tests in the time left.
set -u
t0=$(date +%s)
gcc --version | head -1 > $OUT/gcc.txt; grep -q avx512f /proc/cpuinfo && echo "avx512f present" >> $OUT/gcc.txt
for p in "" "--param=avoid-fma-max-bits=0"; do
  echo "== fmachain.c $p" >> $OUT/gcc.txt
  gcc -O3 -ffp-contract=fast $p -S -o - bench/log/2026-12-07-eleventh/fmachain.c | grep -E "^dot|vfmadd|vmulps|vaddps" >> $OUT/gcc.txt
done
MAX_JOBS=16 FA_BUILD_CUDA=0 python3 setup.py build_ext --inplace > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_variants.py -k lane_widths > $OUT/lanes.txt 2>&1
echo "lanes rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
timeout $(( 135 - $(date +%s) + t0 )) python3 -m pytest -q -p no:cacheprovider -x tests/test_variants.py -k cpu > $OUT/cpu_variants.txt 2>&1
echo "cpu variants rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
cat $OUT/gcc.txt $OUT/times.txt; tail -3 $OUT/lanes.txt; tail -2 $OUT/cpu_variants.txt
