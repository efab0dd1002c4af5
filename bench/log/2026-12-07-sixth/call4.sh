# Call 4 (device tool, carry [".peers/fa3", "build/s5"]), NOT RUN: the session's device time ran out
# before it (refused: too little left to start a machine). For the tree with walk.patch applied
# (git apply bench/log/2026-12-07-sixth/walk.patch; build/s5 = base.so from c22f17e and walk.so with the
# patch, tools.sm90.cap_tune --build-only): the package with the rotated walk; the Hopper grid,
# window-walk, packed and routing tests, test_sm90 and the C plan tests; --set var before (base) and
# after (walk), one round. Then the whole suite.
set -u
t0=$(date +%s)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
git log --oneline -1 > $OUT/tree.txt; git status --short >> $OUT/tree.txt
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3_install.txt 2>&1
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
OMP_NUM_THREADS=1 timeout 75 python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests/test_variants_kernel.py tests/test_sm90.py tests/test_c_api.py -k "hopper_grid or same_bits or packed_walks or which_calls or d64_causal_tile or test_sm90 or c_api" > $OUT/tests.txt 2>&1
echo "tests rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
BUILD=$PWD/build/s5 timeout $(( 228 - $(date +%s) + t0 )) python3 -m tools.sm90.cap_tune --prebuilt --variants base= walk= --set var --rounds 1 > $OUT/var.txt 2>&1
echo "var rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
cat $OUT/times.txt; tail -4 $OUT/tests.txt; grep -v '^{' $OUT/var.txt | tail -15
