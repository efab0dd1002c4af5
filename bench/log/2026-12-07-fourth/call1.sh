# Call 1 (device tool, carry [".peers/fa3", "build/lead"]; build/lead: base.so, vskip.so, lead.so, sm90.cu
# built on the development machine by tools/sm90/cap_tune --build-only with no define /
# FA_SM90_VAR_SKIP=2 / FA_SM90_VAR_SKIP=2,FA_SM90_VAR_LEAD=1). The package is built with tiles.h's
# defaults set to VAR_SKIP 2 and VAR_LEAD 1 (tree.txt), for the whole suite (call 2).
set -u
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
sed -i 's/^#define FA_SM90_VAR_SKIP 0$/#define FA_SM90_VAR_SKIP 2/; s/^#define FA_SM90_VAR_LEAD 0$/#define FA_SM90_VAR_LEAD 1/' csrc/cuda/tiles.h
git log --oneline -1 > $OUT/tree.txt; git diff >> $OUT/tree.txt
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3_install.txt 2>&1
t0=$(date +%s)
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
BUILD=$PWD/build/lead timeout 150 python3 -m tools.sm90.cap_tune --prebuilt --variants base= vskip=FA_SM90_VAR_SKIP=2 lead=FA_SM90_VAR_SKIP=2,FA_SM90_VAR_LEAD=1 --set var --rounds 2 > $OUT/var1.txt 2>&1
echo "var rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
BUILD=$PWD/build/lead timeout 150 python3 -m tools.sm90.cap_tune --prebuilt --variants lead=FA_SM90_VAR_SKIP=2,FA_SM90_VAR_LEAD=1 vskip=FA_SM90_VAR_SKIP=2 base= --set cap --rounds 1 > $OUT/cap1.txt 2>&1
echo "cap rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
cat $OUT/build.txt; grep -h "check\|best" -A12 $OUT/var1.txt | grep -v '^{"round' ; grep -v '^{"round' $OUT/cap1.txt | tail -12
