# Call 4 (device tool, carry [".peers/fa3", "build/s1"]): the package built with sm90_d64_short (bottom-right
# d = 64 calls past 1024 keys on the 3-consumer tile); its routing test; causal windows on each grid at
# d = 64 and 128 (tools/sm90/grids --windows); --set var again (the fa column is the new rule).
set -u
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
git log --oneline -1 > $OUT/tree.txt; git diff >> $OUT/tree.txt
source .peers/fa3/peers.sh install-fa3 > $OUT/fa3_install.txt 2>&1
t0=$(date +%s)
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
timeout 120 python3 -m pytest -q -x tests/test_variants_kernel.py -k "d64_causal_tile or which_calls" tests/test_sm90.py::test_sm90_d64_short_causal_tile > $OUT/tests_tile.txt 2>&1
echo "tests rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
for dw in 64 128; do timeout 90 python3 -m tools.sm90.grids --windows $dw --rounds 3 > $OUT/grids_win_d$dw.txt 2>&1; echo "grids d$dw rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt; done
BUILD=$PWD/build/s1 timeout 90 python3 -m tools.sm90.cap_tune --prebuilt --variants base= --set var --rounds 2 > $OUT/var_rule.txt 2>&1
echo "var rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
cat $OUT/build.txt; tail -3 $OUT/tests_tile.txt; for f in grids_win_d64 grids_win_d128; do tail -6 $OUT/$f.txt; done; grep -v '^{"round' $OUT/var_rule.txt | tail -9
