# Call 1, shortest form (about 330 s of device time left): carry [".peers/fa3", "build/ct"]. The
# package built (the timing tool's reference and columns need it), then the variant timing only
# (cap_tune --set var, base / vskip libraries built here); no tests.
set -u
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
git log --oneline -1 > $OUT/tree.txt
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3_install.txt 2>&1
t0=$(date +%s)
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
BUILD=$PWD/build/ct timeout ${VAR_S:-80} python3 -m tools.sm90.cap_tune --prebuilt --variants base= vskip=FA_SM90_VAR_SKIP=2 --set var --rounds 1 > $OUT/var1.txt 2>&1
echo "var rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
