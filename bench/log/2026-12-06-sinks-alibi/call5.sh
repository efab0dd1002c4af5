#!/usr/bin/env bash
# One call (carries _base.tar of d6d89ea, as call1.sh): both trees built in place side by side, the
# sinks / ALiBi / alignment tests of tests/test_sm90.py and test_variants.py's ALiBi tests, ratio.py
# (dense and ALiBi) on this build twice and on d6d89ea's once; every step under a deadline (the
# device time left). The test_sm90.py step ran out of it here; run again on the warm machine as
# `python3 -m pytest -q tests/test_sm90.py -k "alibi or alignment"`, then `-k sinks`.
set -uo pipefail
t0=$(date +%s)
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
export MAX_JOBS=16 FA_CUDA_ARCHS=90a
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
rm -rf /tmp/ab_base && mkdir -p /tmp/ab_base && tar -xf _base.tar -C /tmp/ab_base
(cd /tmp/ab_base && python3 setup.py build_ext --inplace > $OUT/base_build.log 2>&1; echo "base build rc $?") &
python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo "build rc $?"
echo "build: $(( $(date +%s) - t0 )) s"
timeout $(left 170) python3 -m pytest -q -p no:cacheprovider tests/test_sm90.py -k "alibi or alignment or sinks" > $OUT/tests.txt 2>&1; echo "tests rc $?"
timeout $(left 190) python3 -m pytest -q -p no:cacheprovider tests/test_variants.py -k "alibi" >> $OUT/tests.txt 2>&1; echo "tests rc $?"
grep -E "^FAILED|^ERROR" $OUT/tests.txt | head -10; grep -E "passed|failed" $OUT/tests.txt
echo "tests: $(( $(date +%s) - t0 )) s"
wait
export WHO=dense,alibi
R=bench/log/2026-12-06-sinks-alibi
PYTHONPATH=$PWD timeout $(left 290) python3 $R/ratio.py new 3 >> $OUT/ratio.jsonl 2>> $OUT/ratio.err; echo "new rc $?"
PYTHONPATH=/tmp/ab_base timeout $(left 290) python3 $R/ratio.py base 3 >> $OUT/ratio.jsonl 2>> $OUT/ratio.err; echo "base rc $?"
PYTHONPATH=$PWD timeout $(left 290) python3 $R/ratio.py new 3 >> $OUT/ratio.jsonl 2>> $OUT/ratio.err; echo "new rc $?"
echo "ratio: $(( $(date +%s) - t0 )) s"
python3 $R/summary.py $OUT/ratio.jsonl | tee $OUT/summary.txt
tail -3 $OUT/ratio.err
