# Call 1, shortened to the device time left (about 430 s): carry [".peers/fa3", "build/ct"]. The
# package built with tiles.h's FA_SM90_VAR_SKIP default set to 2 (tree.txt); the variant timing
# (cap_tune --set var, base / vskip libraries built here); then the two variant test files on
# 16 workers until CAP seconds (not the whole suite).
set -u
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
sed -i 's/^#define FA_SM90_VAR_SKIP 0$/#define FA_SM90_VAR_SKIP 2/' csrc/cuda/tiles.h
git log --oneline -1 > $OUT/tree.txt; git diff >> $OUT/tree.txt
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3_install.txt 2>&1
t0=$(date +%s)
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
BUILD=$PWD/build/ct timeout 80 python3 -m tools.sm90.cap_tune --prebuilt --variants base= vskip=FA_SM90_VAR_SKIP=2 --set var --rounds 1 > $OUT/var1.txt 2>&1
echo "var rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
OMP_NUM_THREADS=1 FA_FAILURES=$OUT/failures.txt timeout $(( ${CAP:-330} - $(date +%s) + t0 )) python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests/test_variants_kernel.py tests/test_variants.py > $OUT/variant_tests.txt 2>&1
echo "tests rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
