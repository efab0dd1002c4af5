# Call 2 (device tool; 268 device seconds were left after call 1's machine was taken back unreturned): the
# package built (sm90.cu split over 16 threads; the build's time), tests/test_variants_kernel.py (the
# packed softcap kernels whose registers the split renamed, the packed walk's routing) and test_c_api.py on
# 16 workers; then rule_check.py (one round) in what is left of LIMIT seconds.
set -u
t0=$(date +%s)
LIMIT=${LIMIT:-220}
left() { echo $(( LIMIT - $(date +%s) + t0 )); }
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader > $OUT/gpu.txt
git log --oneline -1 > $OUT/tree.txt; git status --short >> $OUT/tree.txt
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
OMP_NUM_THREADS=1 timeout $(( $(left) - 45 )) python3 -m pytest -q -n 16 -p no:cacheprovider -rfE tests/test_variants_kernel.py tests/test_c_api.py > $OUT/tests.txt 2>&1
echo "tests rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
PYTHONPATH=$PWD timeout $(( $(left) - 3 )) python3 bench/log/2026-12-07-ninth/rule_check.py 1 > $OUT/rule_check.txt 2>&1
echo "rule rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
cat $OUT/gpu.txt $OUT/times.txt; tail -3 $OUT/tests.txt; cat $OUT/rule_check.txt
