#!/usr/bin/env bash
# One call (carries _base.tar: `git archive -o _base.tar d6d89ea csrc setup.py pyproject.toml
# torch_flashattn`): both trees built in place side by side, tests/test_sm90.py and test_variants.py's sinks tests,
# then ratio.py (dense and sinks) on each build, alternating, two passes of three rounds.
set -uo pipefail
t0=$(date +%s)
export MAX_JOBS=16 FA_CUDA_ARCHS=90a
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
rm -rf /tmp/ab_base && mkdir -p /tmp/ab_base && tar -xf _base.tar -C /tmp/ab_base
(cd /tmp/ab_base && python3 setup.py build_ext --inplace > $OUT/base_build.log 2>&1; echo "base build rc $?") &
python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo "build rc $?"
wait
echo "builds: $(( $(date +%s) - t0 )) s"
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_sm90.py > $OUT/tests.txt 2>&1; echo "tests rc $?"
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_variants.py -k "sinks" >> $OUT/tests.txt 2>&1; echo "tests rc $?"
grep -E "^FAILED|^ERROR" $OUT/tests.txt | head -10; grep -E "passed|failed" $OUT/tests.txt
echo "tests: $(( $(date +%s) - t0 )) s"
export WHO=dense,sinks
R=bench/log/2026-12-06-sinks-alibi
for pass in 1 2; do
  PYTHONPATH=/tmp/ab_base timeout 120 python3 $R/ratio.py base 3 >> $OUT/ratio.jsonl 2>> $OUT/ratio.err; echo "base rc $?"
  PYTHONPATH=$PWD timeout 120 python3 $R/ratio.py new 3 >> $OUT/ratio.jsonl 2>> $OUT/ratio.err; echo "new rc $?"
  echo "pass $pass: $(( $(date +%s) - t0 )) s"
done
python3 $R/summary.py $OUT/ratio.jsonl | tee $OUT/summary.txt
tail -3 $OUT/ratio.err
