# Call 5 (device tool, no carry; a fresh machine): the package built from the tree with the d = 128
# counter rule (causal windows of more than 4096 keys on the packed walk); the tests that route,
# force and check the walks and tiles; then the causal windows on each grid (grids_fa4.py without
# FA4: "auto" is the new rule, "tile" the old one where the window holds more than 4096 keys).
set -u
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
git log --oneline -1 > $OUT/tree.txt; git status --short >> $OUT/tree.txt
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
OMP_NUM_THREADS=1 timeout 200 python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests/test_variants_kernel.py tests/test_c_api.py tests/test_sm90.py -k "packed_walk or either_tile or every_hopper_grid or sliding or window or c_api or plan" > $OUT/targeted.txt 2>&1
echo "targeted rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
PYTHONPATH=$PWD timeout $(( 560 - $(date +%s) + t0 )) python3 bench/log/2026-12-07-eighth/grids_fa4.py 2 128 > $OUT/grids.txt 2>&1
echo "grids rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
cat $OUT/times.txt; tail -3 $OUT/targeted.txt; grep -v '^{' $OUT/grids.txt | tail -8
