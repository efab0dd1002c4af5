# Call 2 (device tool): the package built from the tree with the d = 128 counter rule; the C plan checks
# and the packed-walk routing tests; rule_check.py (auto against each grid forced, in turn).
set -u
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
timeout 90 python3 -m pytest -q -p no:cacheprovider -x tests/test_c_api.py tests/test_variants_kernel.py -k "packed_walk or plan" > $OUT/targeted.txt 2>&1
echo "tests rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
PYTHONPATH=$PWD timeout $(( 275 - $(date +%s) + t0 )) python3 bench/log/2026-12-07-ninth/rule_check.py 2 > $OUT/rule_check.txt 2>&1
echo "rule rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
cat $OUT/times.txt; tail -2 $OUT/targeted.txt; cat $OUT/rule_check.txt
