# Call 1 (device tool): the package built from the tree with the d = 128 counter rule (sm90.cu split over
# 16 threads); the C plan checks and the packed-walk routing tests; the whole suite (tests/gpu.sh, failing
# ids appended to $OUT/failures.txt as they fail); then, in the time left of LIMIT seconds (the call's
# limit, given by the caller), rule_check.py: auto against each grid forced, in turn.
#   LIMIT=580 bash call1.sh
set -u
t0=$(date +%s)
LIMIT=${LIMIT:-580}
left() { echo $(( LIMIT - $(date +%s) + t0 )); }
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
lscpu | grep -E "Model name" >> $OUT/gpu.txt; grep -q avx512f /proc/cpuinfo && echo "avx512f present" >> $OUT/gpu.txt
git log --oneline -1 > $OUT/tree.txt; git status --short >> $OUT/tree.txt
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
timeout 60 python3 -m pytest -q -p no:cacheprovider -x tests/test_c_api.py tests/test_variants_kernel.py -k "packed_walk or plan" > $OUT/targeted.txt 2>&1
echo "tests rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
FA_FAILURES=$OUT/failures.txt timeout $(( $(left) - 8 )) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
if [ $(left) -gt 40 ]; then
  PYTHONPATH=$PWD timeout $(( $(left) - 5 )) python3 bench/log/2026-12-07-ninth/rule_check.py 1 > $OUT/rule_check.txt 2>&1
  echo "rule rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
fi
cat $OUT/times.txt; tail -2 $OUT/targeted.txt; tail -3 $OUT/suite.txt; cat $OUT/rule_check.txt 2>/dev/null
