#!/usr/bin/env bash
# One device call: exact exponents in the Hopper variant kernels (sm90_softmax's vote where f is the
# identity, VAR too). Builds this tree ("new") and this tree with HEAD's csrc ("base", git archive HEAD csrc; the change is
# uncommitted while it runs) for sm_90a side by side; the new huge-score test on both
# (base: the raw sm90 cases must fail), the plain one and test_variants_kernel.py on new; then
# tools/ab_variants.py on the visibility points, alternated rounds.
#     OUT=<dir> bash bench/log/2026-12-06-third/varexp.sh
set -uo pipefail
t0=$(date +%s); export OMP_NUM_THREADS=1
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
D=bench/log/2026-12-06-third
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
rm -rf /tmp/t_base build torch_flashattn/_C*.so && mkdir -p /tmp/t_base
tar -cf - setup.py pyproject.toml torch_flashattn tests tools bench | tar -xf - -C /tmp/t_base
git archive HEAD csrc | tar -xf - -C /tmp/t_base && echo "base: $(git rev-parse --short HEAD)'s csrc"
git diff --stat HEAD -- csrc
(cd /tmp/t_base && MAX_JOBS=8 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > /tmp/build_base.log 2>&1; echo "base build rc $?") &
(MAX_JOBS=8 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > /tmp/build_new.log 2>&1; echo "new build rc $?") &
wait; echo "built $(( $(date +%s) - t0 )) s"
(cd /tmp/t_base && timeout 60 python3 -m pytest -q -p no:cacheprovider --tb=line tests/test_variants_kernel.py -k huge_scores \
    > $OUT/tests_base.txt 2>&1); echo "base huge tests: $(tail -1 $OUT/tests_base.txt)"
grep -o "FAILED [^ ]*" $OUT/tests_base.txt | sed 's/.*\[//' | sort | head -50 > $OUT/base_failed.txt
timeout $(left 240) python3 -m pytest -q -n 8 -p no:cacheprovider -rfE --tb=short tests/test_variants_kernel.py \
    "tests/test_values.py::test_huge_scores_plain_kernels" > $OUT/tests_new.txt 2>&1
rc=$?; echo "new tests rc $rc $(( $(date +%s) - t0 )) s: $(tail -1 $OUT/tests_new.txt)"
[ $rc -ne 0 ] && { grep -E "^FAILED" $OUT/tests_new.txt | head; exit 1; }
for r in 1 2 3 4; do
    for b in $( [ $((r % 2)) = 1 ] && echo "base new" || echo "new base" ); do
        p=/tmp/t_base; [ $b = new ] && p=$PWD
        [ $(left 560) -lt 40 ] && break 2
        (cd $p && PYTHONPATH=$p timeout $(left 580) python3 tools/ab_variants.py $b sliding bottom-right padded varlen sinks softcap \
            >> $OUT/ab.jsonl 2>> $OUT/ab.err)
        echo "round $r $b $(( $(date +%s) - t0 )) s"
    done
done
tail -3 $OUT/ab.err
python3 $D/ab_var_summary.py $OUT/ab.jsonl | tee $OUT/ab_summary.txt
