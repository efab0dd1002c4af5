# Call 1 (device tool, carry [".peers/fa3"]): FA3 installed under /tmp for call 3; the package built from the tree with the d = 128 counter rule; the C plan checks
# and the packed-walk routing tests; rule_check.py (auto against each grid forced, in turn); then the whole
# suite (tests/gpu.sh) in the time left, failing ids appended to $OUT/failures.txt as they fail.
set -u
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
lscpu | grep -E "Model name|Flags" | sed 's/Flags:.*avx512f.*/Flags: avx512f present/' | cut -c1-120 >> $OUT/gpu.txt
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3_install.txt 2>&1; echo "fa3 rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
git log --oneline -1 > $OUT/tree.txt; git status --short >> $OUT/tree.txt
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
timeout 90 python3 -m pytest -q -p no:cacheprovider -x tests/test_c_api.py tests/test_variants_kernel.py -k "packed_walk or plan" > $OUT/targeted.txt 2>&1
echo "tests rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
PYTHONPATH=$PWD timeout $(( 270 - $(date +%s) + t0 )) python3 bench/log/2026-12-07-ninth/rule_check.py 2 > $OUT/rule_check.txt 2>&1
echo "rule rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
FA_FAILURES=$OUT/failures.txt timeout $(( 585 - $(date +%s) + t0 )) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
cat $OUT/times.txt; tail -2 $OUT/targeted.txt; cat $OUT/rule_check.txt; tail -3 $OUT/suite.txt
