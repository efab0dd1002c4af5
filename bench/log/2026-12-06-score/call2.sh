#!/usr/bin/env bash
# Call 2 (H100 or H200): which Hopper tiles wait for P V before the softmax (FA_SM90_PV_FIRST) beside
# the exact-exponent branch. Three sm_90a builds side by side: base (main's csrc, from
# score_csrc.diff reversed), "d64" (the tree as it is: PV_FIRST on the d = 64 tile only) and
# "none" (FA_SM90_PV_FIRST 0); the new huge-score tests on "d64"; then the 9 + 3 points of
# score_ab.py, 3 rounds, rotated, each label in its own process. "all" (every unfenced tile) is call
# 1's "new" (bench/log/2026-12-06-score/call1).
#     OUT=<dir> bash bench/log/2026-12-06-score/call2.sh
set -uo pipefail
t0=$(date +%s); export OMP_NUM_THREADS=1
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
D=bench/log/2026-12-06-score
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
for t in base none; do
    rm -rf /tmp/t_$t && mkdir -p /tmp/t_$t
    tar -cf - csrc setup.py pyproject.toml torch_flashattn tests | tar -xf - -C /tmp/t_$t
    rm -f /tmp/t_$t/torch_flashattn/_C*.so
done
(cd /tmp/t_base && git apply --reverse --include='csrc/*' $OLDPWD/$D/score_csrc.diff && echo "base: main's csrc")
grep -c FA_EXACT_EXP_FROM /tmp/t_base/csrc/cuda/softmax.cuh
sed -i 's/^#define FA_SM90_PV_FIRST -1$/#define FA_SM90_PV_FIRST 0/' /tmp/t_none/csrc/cuda/sm90_steps.cuh
grep -n "^#define FA_SM90_PV_FIRST" /tmp/t_none/csrc/cuda/sm90_steps.cuh csrc/cuda/sm90_steps.cuh
for t in base none; do
    (cd /tmp/t_$t && MAX_JOBS=5 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > $OUT/build_$t.log 2>&1; echo "$t build rc $?") &
done
(MAX_JOBS=6 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > $OUT/build_d64.log 2>&1; echo "d64 build rc $?") &
wait; echo "built $(( $(date +%s) - t0 )) s"
NEW="tests/test_values.py::test_huge_scores_plain_kernels tests/test_sm90.py::test_sm90_huge_scores_never_a_silent_wrong_row"
PYTHONPATH=$PWD timeout $(left 250) python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=line $NEW > $OUT/new_tests.txt 2>&1
echo "new tests rc $? $(( $(date +%s) - t0 )) s"; tail -1 $OUT/new_tests.txt
cp bench/log/2026-12-06-score/score_ab.py /tmp/score_ab.py
for r in 1 2 3; do
    case $r in 1) order="base d64 none";; 2) order="d64 none base";; 3) order="none base d64";; esac
    for b in $order; do
        [ $(left 560) -gt 25 ] || break 2
        p=/tmp/t_$b; [ $b = d64 ] && p=$PWD
        (cd /tmp && PYTHONPATH=$p timeout $(left 580) python3 /tmp/score_ab.py $b $r >> $OUT/ab.jsonl 2>> $OUT/ab.err)
    done
done
echo "A/B done $(( $(date +%s) - t0 )) s"; tail -3 $OUT/ab.err
python3 $D/ab_summary.py $OUT/ab.jsonl base d64 none | tee $OUT/ab_summary.txt
