# Call 3 (device tool, carry [".peers/fa3", "build/final"]; build/final: old.so, vskip.so, new.so, sm90.cu
# built on the development machine by tools/sm90/cap_tune --build-only with FA_SM90_VAR_SKIP=0,
# FA_SM90_VAR_LEAD=0 / FA_SM90_VAR_LEAD=0 / tiles.h's new defaults (skip 2, lead 1 on BM > BN tiles)).
# The package is built as committed (the "fa" column is the new default).
set -u
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
git log --oneline -1 > $OUT/tree.txt; git diff >> $OUT/tree.txt
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3_install.txt 2>&1
t0=$(date +%s)
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
BUILD=$PWD/build/final timeout 150 python3 -m tools.sm90.cap_tune --prebuilt --variants new= vskip=FA_SM90_VAR_LEAD=0 old=FA_SM90_VAR_SKIP=0,FA_SM90_VAR_LEAD=0 --set var --rounds 2 > $OUT/var1.txt 2>&1
echo "var rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
BUILD=$PWD/build/final timeout 150 python3 -m tools.sm90.cap_tune --prebuilt --variants old=FA_SM90_VAR_SKIP=0,FA_SM90_VAR_LEAD=0 new= vskip=FA_SM90_VAR_LEAD=0 --set cap --rounds 1 > $OUT/cap1.txt 2>&1
echo "cap rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
cat $OUT/build.txt; grep -v '^{"round' $OUT/var1.txt | tail -12; grep -v '^{"round' $OUT/cap1.txt | tail -12
