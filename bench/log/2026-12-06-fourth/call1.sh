#!/usr/bin/env bash
# One device call, two uncommitted changes against HEAD's csrc ("base": git archive HEAD csrc):
#  (1) bench/log/2026-12-06-third/var_exact.diff: exact exponents in the Hopper variant kernels;
#  (2) bench/log/2026-12-06-fourth/split.diff: the power-of-two split of scale · log2 e shared by the
#      CUDA fp32 families (fa_variant.h fa_q_multiplier), as the C backend has it.
# They touch disjoint kernels (sm90 VAR kernels; fp32 / simt / fp32tc / decode_simt). Builds both
# trees for sm_90a side by side; base and new: the huge-score variant test, the fp32 rounding cases,
# fp32_err.py; new: test_variants_kernel.py, the plain huge-score test, test_random on the fp32
# families; then tools/ab_variants.py on the visibility points, alternated rounds.
#     OUT=<dir> bash bench/log/2026-12-06-fourth/call1.sh
set -uo pipefail
t0=$(date +%s); export OMP_NUM_THREADS=1
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
D=bench/log/2026-12-06-third; E=bench/log/2026-12-06-fourth
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
rm -rf /tmp/t_base build torch_flashattn/_C*.so && mkdir -p /tmp/t_base
tar -cf - setup.py pyproject.toml torch_flashattn tests tools bench | tar -xf - -C /tmp/t_base
git archive HEAD csrc | tar -xf - -C /tmp/t_base && echo "base: $(git rev-parse --short HEAD)'s csrc"
git diff --stat HEAD -- csrc
(cd /tmp/t_base && MAX_JOBS=8 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > /tmp/build_base.log 2>&1; echo "base build rc $?") &
(MAX_JOBS=8 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > /tmp/build_new.log 2>&1; echo "new build rc $?") &
wait; echo "built $(( $(date +%s) - t0 )) s"
for t in base new; do
    p=/tmp/t_base; [ $t = new ] && p=$PWD
    (cd $p && timeout 60 python3 -m pytest -q -p no:cacheprovider --tb=line tests/test_variants_kernel.py -k huge_scores \
        > $OUT/huge_$t.txt 2>&1); echo "$t huge tests: $(tail -1 $OUT/huge_$t.txt)"
    (cd $p && timeout 60 python3 -m pytest -q -p no:cacheprovider --tb=line tests/test_random.py -k fp32_rounding \
        > $OUT/rounding_$t.txt 2>&1); echo "$t rounding tests: $(tail -1 $OUT/rounding_$t.txt)"
    (cd $p && PYTHONPATH=$p timeout 90 python3 $PWD/$E/fp32_err.py $t fp32 simt >> $OUT/fp32_err.jsonl 2>> $OUT/fp32_err.err)
    echo "$t fp32_err $(( $(date +%s) - t0 )) s"
done
grep -o "FAILED [^ ]*" $OUT/huge_base.txt | sed 's/.*\[//' | sort > $OUT/base_failed.txt
cat $OUT/fp32_err.jsonl; tail -3 $OUT/fp32_err.err
timeout $(left 300) python3 -m pytest -q -n 8 -p no:cacheprovider -rfE --tb=short tests/test_variants_kernel.py \
    "tests/test_values.py::test_huge_scores_plain_kernels" tests/test_random.py -k "not gradients" > $OUT/tests_new.txt 2>&1
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
