#!/usr/bin/env bash
# Call 4 (H100 or H200): the exact-exponent branch with its vote taken on each lane's max before the
# quad's shuffles (this tree) against main's csrc (score_csrc.diff reversed, sm_90a): builds side by
# side, then score_ab.py's long points, 3 rounds alternated, then the whole suite (tests/gpu.sh) on
# this tree's full build in the time left.
#     OUT=<dir> bash bench/log/2026-12-06-score/call4.sh
set -uo pipefail
t0=$(date +%s); export OMP_NUM_THREADS=1
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
D=bench/log/2026-12-06-score
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
rm -rf /tmp/t_base && mkdir -p /tmp/t_base
tar -cf - csrc setup.py pyproject.toml torch_flashattn tests | tar -xf - -C /tmp/t_base
rm -f /tmp/t_base/torch_flashattn/_C*.so
(cd /tmp/t_base && git apply --reverse --include='csrc/*' $OLDPWD/$D/score_csrc.diff && echo "base: main's csrc")
(cd /tmp/t_base && MAX_JOBS=5 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > /tmp/build_base.log 2>&1; echo "base build rc $?") &
(MAX_JOBS=11 python3 -m pip install --no-build-isolation --no-deps -e . -q > /tmp/build_new.log 2>&1; echo "new build rc $?") &
wait; echo "built $(( $(date +%s) - t0 )) s"; tar -czf $OUT/builds.tgz -C /tmp build_base.log build_new.log
cp $D/score_ab.py /tmp/score_ab.py
export SCORE_AB_POINTS=long
for r in 1 2 3; do
    for b in $( [ $((r % 2)) = 1 ] && echo "base new" || echo "new base" ); do
        p=/tmp/t_$b; [ $b = new ] && p=$PWD
        (cd /tmp && PYTHONPATH=$p timeout $(left 300) python3 /tmp/score_ab.py $b $r >> $OUT/ab.jsonl 2>> /tmp/ab.err)
    done
done
echo "A/B done $(( $(date +%s) - t0 )) s"; tail -3 /tmp/ab.err
python3 $D/ab_summary.py $OUT/ab.jsonl base new | tee $OUT/ab_summary.txt
unset SCORE_AB_POINTS
timeout $(left 592) bash tests/gpu.sh > $OUT/suite.txt 2>&1
echo "suite rc $? $(( $(date +%s) - t0 )) s"
grep -E "^FAILED|^ERROR" $OUT/suite.txt | head -20; grep -E "passed|failed" $OUT/suite.txt | tail -3
