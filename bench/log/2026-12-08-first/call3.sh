# Call 3 (device tool; calls 1 and 2 in one, for want of device time): the package built at the landed
# tree; the host's gcc and fmachain.c; the lane-width test; grid_probe.py (our long causal calls on each
# grid and the variant kernel on the counter walk, FlashAttention-3 beside them). Where the counter walk
# is ahead of our plain auto at both d = 128 points past 4k keys, causal_counter.patch is applied and the
# package rebuilt; then the whole suite (tests/gpu.sh) on the tree so built, and, with the patch,
# grid_probe.py again with the new auto beside the old grids.
#   LIMIT=560 bash call3.sh      (carry .peers/fa3)
set -u
t0=$(date +%s)
LIMIT=${LIMIT:-560}
L=bench/log/2026-12-08-first
left() { echo $(( LIMIT - $(date +%s) + t0 )); }
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
lscpu | grep -E "Model name" >> $OUT/gpu.txt; grep -q avx512f /proc/cpuinfo && echo "avx512f present" >> $OUT/gpu.txt
gcc --version | head -1 >> $OUT/gpu.txt
for p in "" "--param=avoid-fma-max-bits=0"; do
  echo "== fmachain.c $p" >> $OUT/gcc.txt
  gcc -O3 -ffp-contract=fast $p -S -o - bench/log/2026-12-07-eleventh/fmachain.c | grep -E "^dot|vfmadd|vmulps|vaddps" >> $OUT/gcc.txt
done
git log --oneline -1 > $OUT/tree.txt
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_variants.py -k lane_widths > $OUT/lanes.txt 2>&1
echo "lanes rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3.txt 2>&1
export PYTHONPATH=$PWD:${PYTHONPATH:-}
timeout 90 python3 $L/grid_probe.py 2 > $OUT/grid_probe.txt 2>&1
echo "probe rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
take=$(python3 - $OUT/grid_probe.txt <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
med = lambda x: sorted(x)[len(x) // 2]
ok = [med(r["var counter"]) > med(r["plain auto"]) for r in rows if r["d"] == 128 and r["N"] > 4096]
print(1 if len(ok) == 2 and all(ok) else 0)
PY
)
echo "patch taken: $take" >> $OUT/times.txt
if [ "$take" = 1 ]; then
  git apply $L/causal_counter.patch && git status --short >> $OUT/tree.txt
  gcc -std=c11 -O2 -Wall -Wextra -Werror -Icsrc -Icsrc/cuda tests/c/test_plan.c csrc/cuda/plan.c csrc/fa_common.c -lm -o /tmp/tp && /tmp/tp | tail -1 >> $OUT/times.txt
  MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build2.txt 2>&1
  echo "build2 rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
fi
FA_FAILURES=$OUT/failures.txt timeout $(( $(left) - 45 )) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
if [ "$take" = 1 ] && [ $(left) -gt 25 ]; then
  timeout $(( $(left) - 3 )) python3 $L/grid_probe.py 1 "plain auto,plain tile,plain pairs,fa3" > $OUT/grid_probe2.txt 2>&1
  echo "probe2 rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
fi
cat $OUT/gpu.txt $OUT/gcc.txt $OUT/times.txt; tail -3 $OUT/lanes.txt; tail -3 $OUT/suite.txt; cat $OUT/grid_probe.txt $OUT/grid_probe2.txt 2>/dev/null
