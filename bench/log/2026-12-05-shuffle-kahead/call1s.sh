#!/usr/bin/env bash
# The backward A/B of bwd_shuffle.patch, one GPU call (not yet run): this tree is main with the patch
# applied (`git apply bench/log/2026-12-05-shuffle-kahead/bwd_shuffle.patch`); carry _dev/base.tar,
# main's sources (`git archive -o _dev/base.tar HEAD csrc setup.py pyproject.toml torch_flashattn`
# before applying). Both built in place for sm_90a only (FA_CUDA_ARCHS=90a), side by side; the d = 64
# backward A/B (main = base, this tree = new), two rounds; then the backward tests on this tree.
set -uo pipefail
t0=$(date +%s)
ROOT=$PWD
L=bench/log/2026-12-05-shuffle-kahead
export FA_CUDA_ARCHS=90a
nvidia-smi --query-gpu=name --format=csv,noheader
rm -rf /tmp/base && mkdir /tmp/base && tar -xf _dev/base.tar -C /tmp/base
(cd /tmp/base && MAX_JOBS=8 python3 setup.py build_ext --inplace > $OUT/build_base.log 2>&1; echo "base build rc $?" >> $OUT/build_base.log) &
MAX_JOBS=8 python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo "build rc $?" >> $OUT/build.log
wait
tail -n1 $OUT/build.log $OUT/build_base.log
echo "builds: $(( $(date +%s) - t0 )) s"
for r in 1 2; do
  (cd /tmp/base && PYTHONPATH=/tmp/base:$ROOT timeout 45 python3 $ROOT/$L/bwd_ab.py base_$r)
  (cd $ROOT && PYTHONPATH=$ROOT timeout 45 python3 $L/bwd_ab.py new_$r)
done > $OUT/bwd_ab.jsonl 2> $OUT/bwd_ab.err
tail -4 $OUT/bwd_ab.err; python3 $L/ab_sum.py $OUT/bwd_ab.jsonl
echo "ab: $(( $(date +%s) - t0 )) s"
PYTHONPATH=$ROOT OMP_NUM_THREADS=1 timeout $(( 500 - ($(date +%s) - t0) )) python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short tests/test_backward_kernel.py tests/test_backward.py > $OUT/tests.txt 2>&1; echo "tests rc $?" >> $OUT/tests.txt
tail -3 $OUT/tests.txt
echo "call: $(( $(date +%s) - t0 )) s"
