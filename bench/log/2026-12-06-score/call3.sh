#!/usr/bin/env bash
# Call 3 (H100 or H200), carry [".peers/fa3"]: (a) issue 35's sm90_kv_wait experiment
# (bench/log/2026-12-06-causal-next: its diff applied on this tree, its tests, its ratio.py with FA3)
# and (b) a longer A/B of the exact-exponent branch (no PV_FIRST) against main's csrc on the points
# where calls 1 and 2 moved most: 5 rounds, alternated, each label in its own process.
#     OUT=<dir> bash bench/log/2026-12-06-score/call3.sh
set -uo pipefail
t0=$(date +%s); export OMP_NUM_THREADS=1
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
D=bench/log/2026-12-06-score; C=bench/log/2026-12-06-causal-next
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
rm -rf /tmp/t_base && mkdir -p /tmp/t_base
tar -cf - csrc setup.py pyproject.toml torch_flashattn tests | tar -xf - -C /tmp/t_base
rm -f /tmp/t_base/torch_flashattn/_C*.so
(cd /tmp/t_base && git apply --reverse --include='csrc/*' $OLDPWD/$D/score_csrc.diff && echo "base: main's csrc")
git apply $C/causal_next.diff && echo "causal_next.diff applied"; git diff --stat | tail -1
(cd /tmp/t_base && MAX_JOBS=6 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > $OUT/build_base.log 2>&1; echo "base build rc $?") &
(MAX_JOBS=10 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > $OUT/build_new.log 2>&1; echo "new build rc $?") &
wait; echo "built $(( $(date +%s) - t0 )) s"
PYTHONPATH=$PWD timeout $(left 260) python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short \
    tests/test_sm90.py tests/test_values.py -k "kv_wait or huge_scores" > $OUT/tests.txt 2>&1
rc=$?; echo "tests rc $rc $(( $(date +%s) - t0 )) s"; grep -E "^FAILED|^ERROR" $OUT/tests.txt | head; tail -1 $OUT/tests.txt
if [ $rc -eq 0 ]; then
    [ -d .peers/fa3 ] && source .peers/fa3/peers.sh install-fa3 > $OUT/fa3.txt 2>&1; tail -1 $OUT/fa3.txt 2>/dev/null
    PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} timeout $(left 380) python3 $C/ratio.py call3 3 > $OUT/ratio.jsonl 2> $OUT/ratio.err
    echo "ratio rc $? $(( $(date +%s) - t0 )) s"; tail -3 $OUT/ratio.err
    python3 $C/summary.py $OUT/ratio.jsonl | tee $OUT/summary.txt
fi
cp $D/score_ab.py /tmp/score_ab.py
export SCORE_AB_POINTS=long
for r in 1 2 3 4 5; do
    for b in $( [ $((r % 2)) = 1 ] && echo "base new" || echo "new base" ); do
        [ $(left 570) -gt 25 ] || break 2
        p=/tmp/t_$b; [ $b = new ] && p=$PWD
        (cd /tmp && PYTHONPATH=$p timeout $(left 585) python3 /tmp/score_ab.py $b $r >> $OUT/ab.jsonl 2>> $OUT/ab.err)
    done
done
echo "A/B done $(( $(date +%s) - t0 )) s"; tail -3 $OUT/ab.err
python3 $D/ab_summary.py $OUT/ab.jsonl base new | tee $OUT/ab_summary.txt
