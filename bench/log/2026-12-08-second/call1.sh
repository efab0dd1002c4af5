# Call 1 (device tool, carry .peers/fa3): the package and three sm90.cu libraries built together (base,
# FA_SM90_V_LAG=1, FA_SM90_WALK_FENCE=1; tools/sm90/ab.py --build-only), the sections probe
# (sections_probe.py, two rounds), the A/B of the libraries with the counter's scratch, the whole suite
# (tests/gpu.sh), then Nsight Compute on the 16k causal call (ncu_probe.py) if time is left.
#   LIMIT=585 bash bench/log/2026-12-08-second/call1.sh
set -u
t0=$(date +%s)
LIMIT=${LIMIT:-585}
L=bench/log/2026-12-08-second
left() { echo $(( LIMIT - $(date +%s) + t0 )); }
{ nvidia-smi --query-gpu=name,power.limit --format=csv,noheader; git log --oneline -1; git status --short; } > $OUT/times.txt
export BUILD=/tmp/sm90_ab
CABI_SPLIT=4 python3 -m tools.sm90.ab --variants base= vlag=FA_SM90_V_LAG=1 fence=FA_SM90_WALK_FENCE=1 --build-only > $OUT/ab_build.txt 2>&1 &
MAX_JOBS=12 python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.txt 2>&1
echo "build rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
wait
echo "ab build $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
source .peers/fa3/peers.sh install-fa3 >> $OUT/build.txt 2>&1
PYTHONPATH=$PWD:${PYTHONPATH:-} timeout 120 python3 $L/sections_probe.py 2 > $OUT/sections.txt 2>&1
echo "probe rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
timeout 150 python3 -m tools.sm90.ab --prebuilt --scratch 256 --variants base= vlag=FA_SM90_V_LAG=1 fence=FA_SM90_WALK_FENCE=1 --rounds 2 \
  --points d128c8k d128c16k d128c4k d128c8kh d128c2k d1288k d64c8k d256c8k > $OUT/ab.txt 2>&1
echo "ab rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
FA_FAILURES=$OUT/failures.txt timeout $(( $(left) - 5 )) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
if [ $(left) -gt 40 ]; then
  M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,lts__t_bytes.sum.per_second,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,smsp__issue_active.avg.pct_of_peak_sustained_active
  timeout $(( $(left) - 3 )) ncu --clock-control none --kernel-name regex:"fa_sm90|FlashAttn|flash" --metrics $M \
    python3 $L/ncu_probe.py > $OUT/ncu.txt 2>&1
  echo "ncu rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times.txt
fi
cat $OUT/times.txt; cat $OUT/sections.txt; grep -v '"round"' $OUT/ab.txt | tail -14; tail -3 $OUT/suite.txt
cat $OUT/failures.txt 2>/dev/null
grep -E "fa_sm90|FlashAttn|flash|duration|dram__|hit_rate|lts__t_bytes|tensor_cycles|per_second|issue_active" $OUT/ncu.txt 2>/dev/null | cut -c1-150 | head -60
