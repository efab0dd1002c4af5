# Call 1 (device tool, carry .peers/fa3): the build, the sections probe (sections_probe.py, two rounds),
# the whole suite (tests/gpu.sh), then Nsight Compute on the 16k causal call (ncu_probe.py) if time is left.
#   LIMIT=590 bash bench/log/2026-12-08-second/call1.sh
set -u
t0=$(date +%s)
LIMIT=${LIMIT:-590}
L=bench/log/2026-12-08-second
left() { echo $(( LIMIT - $(date +%s) + t0 )); }
{ nvidia-smi --query-gpu=name,power.limit --format=csv,noheader; git log --oneline -1; git status --short; } > $OUT/env.txt
MAX_JOBS=16 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
source .peers/fa3/peers.sh install-fa3 >> $OUT/build.txt 2>&1
PYTHONPATH=$PWD:${PYTHONPATH:-} timeout 150 python3 $L/sections_probe.py 2 > $OUT/sections.txt 2>&1
echo "probe rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
FA_FAILURES=$OUT/failures.txt timeout $(( $(left) - 5 )) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
if [ $(left) -gt 40 ]; then
  M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,smsp__issue_active.avg.pct_of_peak_sustained_active
  timeout $(( $(left) - 3 )) ncu --clock-control none --kernel-name regex:"fa_sm90|FlashAttn|flash" --metrics $M \
    python3 $L/ncu_probe.py > $OUT/ncu.txt 2>&1
  echo "ncu rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
fi
cat $OUT/env.txt $OUT/times.txt; cat $OUT/sections.txt; tail -3 $OUT/suite.txt; cat $OUT/failures.txt 2>/dev/null
grep -E "fa_sm90|FlashAttn|flash|duration|dram__|hit_rate|tensor_cycles|per_second|issue_active" $OUT/ncu.txt 2>/dev/null | cut -c1-160 | head -60
