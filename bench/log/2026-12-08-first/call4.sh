# Call 4 (device tool): the tree with the long causal d = 128 calls (and sinks alone) on the counter walk,
# as committed: the build, the C plan checks, the sm90 tests, the plan test, the sinks and counter-walk
# variant tests, then grid_probe.py at d = 128 with the new auto beside the old grids and FlashAttention-3.
#   LIMIT=200 bash call4.sh      (carry .peers/fa3; PROBE_S=3: the tests take all but 3 s of the time after the build)
set -u
t0=$(date +%s)
LIMIT=${LIMIT:-200}
L=bench/log/2026-12-08-first
left() { echo $(( LIMIT - $(date +%s) + t0 )); }
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader > $OUT/gpu4.txt
git log --oneline -1 > $OUT/tree4.txt; git status --short >> $OUT/tree4.txt
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build4.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times4.txt
FA_FAILURES=$OUT/failures4.txt timeout $(( $(left) - ${PROBE_S:-35} )) python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short \
  tests/test_sm90.py tests/test_c_api.py tests/test_variants_kernel.py -k "sm90 or plan or sink or counter" > $OUT/tests4.txt 2>&1
echo "tests rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times4.txt
if [ $(left) -gt 15 ]; then
  source .peers/fa3/peers.sh install-fa3 > /dev/null 2>&1
  PYTHONPATH=$PWD:${PYTHONPATH:-} PROBE_D=128 timeout $(( $(left) - 2 )) python3 $L/grid_probe.py 1 \
    "plain auto,plain tile,plain pairs,fa3" > $OUT/grid_probe4.txt 2>&1
  echo "probe rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times4.txt
fi
cat $OUT/gpu4.txt $OUT/times4.txt; tail -3 $OUT/tests4.txt; cat $OUT/failures4.txt 2>/dev/null; cat $OUT/grid_probe4.txt
