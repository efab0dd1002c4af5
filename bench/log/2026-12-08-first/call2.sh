# Call 2 (device tool, right after call 1 on the warm machine): causal_counter.patch applied (long
# causal calls at d = 128 without variants on the variant kernel's counter walk), the package rebuilt
# in place, the C plan checks, the sm90 grid and causal tests and the counter-walk variant tests,
# then grid_probe.py with the new auto beside the old grids and FlashAttention-3.
#   LIMIT=400 bash call2.sh
set -u
t0=$(date +%s)
LIMIT=${LIMIT:-400}
left() { echo $(( LIMIT - $(date +%s) + t0 )); }
git apply bench/log/2026-12-08-first/causal_counter.patch && git status --short > $OUT/tree2.txt
gcc -std=c11 -O2 -Wall -Wextra -Werror -Icsrc -Icsrc/cuda tests/c/test_plan.c csrc/cuda/plan.c csrc/fa_common.c -lm -o /tmp/tp && /tmp/tp | tail -1 > $OUT/plan2.txt
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build2.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times2.txt
FA_FAILURES=$OUT/failures2.txt timeout $(( $(left) - 60 )) python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short \
  tests/test_sm90.py tests/test_forward.py tests/test_random.py tests/test_variants_kernel.py -k "causal or grid or counter or random" > $OUT/tests2.txt 2>&1
echo "tests rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times2.txt
if [ $(left) -gt 30 ]; then
  source .peers/fa3/peers.sh install-fa3 > /dev/null 2>&1
  PYTHONPATH=$PWD:${PYTHONPATH:-} timeout $(( $(left) - 5 )) python3 bench/log/2026-12-08-first/grid_probe.py 2 \
    "plain auto,plain tile,plain pairs,fa3" > $OUT/grid_probe2.txt 2>&1
  echo "probe rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times2.txt
fi
cat $OUT/plan2.txt $OUT/times2.txt; tail -3 $OUT/tests2.txt; cat $OUT/grid_probe2.txt
