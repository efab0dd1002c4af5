# Call 1 (device tool, carry [".peers/fa3", "build/s1"]; build/s1: sm90.cu built on the development
# machine by tools/sm90/cap_tune --build-only at ba22ec2: base (tiles.h's defaults), maxf
# (FA_SM90_MAX_FENCE=1), short512 (FA_SM90_D64_SHORT_CAUSAL=512)). The package is built as committed.
set -u
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
git log --oneline -1 > $OUT/tree.txt; git diff >> $OUT/tree.txt
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3_install.txt 2>&1
t0=$(date +%s)
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
export BUILD=$PWD/build/s1
timeout 120 python3 -m tools.sm90.cap_tune --prebuilt --variants base= maxf=FA_SM90_MAX_FENCE=1 --set cap --rounds 2 > $OUT/cap_maxf.txt 2>&1
echo "cap rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
timeout 150 python3 -m tools.sm90.ab --prebuilt --variants maxf=FA_SM90_MAX_FENCE=1 base= --points d128c2k d128c4k d128c8k d128c16k d1282k d1284k d64c4k d644k d256c4k d2564k --rounds 2 > $OUT/ab_maxf.txt 2>&1
echo "ab rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
timeout 120 python3 -m tools.sm90.cap_tune --prebuilt --variants short512=FA_SM90_D64_SHORT_CAUSAL=512 base= --set var --rounds 2 > $OUT/var_short512.txt 2>&1
echo "var rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
cat $OUT/build.txt; for f in cap_maxf ab_maxf var_short512; do echo "== $f"; grep -v '^{"round' $OUT/$f.txt | tail -16; done
