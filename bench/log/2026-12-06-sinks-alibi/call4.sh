#!/usr/bin/env bash
# On the same warm machine: ratio.py (dense and sinks) on f22357f twice, then racecheck on the Hopper tests.
t0=$(date +%s); R=bench/log/2026-12-06-sinks-alibi; export WHO=dense,sinks
for p in 1 2; do timeout 100 python3 $R/ratio.py new 3 >> $OUT/ratio.jsonl 2>> $OUT/ratio.err; echo "new rc $?"; done
python3 $R/summary.py $OUT/ratio.jsonl | tee $OUT/summary.txt
SANITIZE_ONLY=sm90 timeout $(( 400 - ($(date +%s) - t0) )) bash tests/sanitize.sh racecheck > $OUT/san_racecheck.txt 2>&1; echo "racecheck rc $?"
tail -4 $OUT/san_racecheck.txt
