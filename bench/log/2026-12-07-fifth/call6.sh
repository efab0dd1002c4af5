# Call 6 (device tool, no carry): the package built with the window snake rule (fa_plan_sm90_window_snake:
# causal windows whose persistent snake leaves its busiest CTA past 1.10 of the mean run one CTA per tile);
# causal windows on each grid at d = 64 and 128 (auto: the rule), then the whole suite in what is left.
set -u
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
git log --oneline -1 > $OUT/tree.txt; git diff >> $OUT/tree.txt
t0=$(date +%s)
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
for dw in 64 128; do timeout 60 python3 -m tools.sm90.grids --windows $dw --rounds 2 > $OUT/grids_win_d$dw.txt 2>&1; echo "grids d$dw rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt; done
cat $OUT/build.txt; for f in grids_win_d64 grids_win_d128; do tail -8 $OUT/$f.txt; done
OMP_NUM_THREADS=1 FA_FAILURES=$OUT/failures.txt timeout $(( ${CAP:-530} - $(date +%s) + t0 )) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s)-t0 )) s" >> $OUT/build.txt
tail -1 $OUT/build.txt; tail -4 $OUT/suite.txt
