#!/usr/bin/env bash
# One device call after suite.sh on the same warm machine: tools/ab_variants.py, this tree's build
# ("new", every architecture, from suite.sh; sm_90a built here if absent) against HEAD's csrc
# ("base", sm_90a, /tmp/t_base, kept from call1.sh where the machine is the same), alternated rounds.
#     OUT=<dir> bash bench/log/2026-12-06-fourth/ab2.sh
set -uo pipefail
t0=$(date +%s); export OMP_NUM_THREADS=1
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
git diff --stat HEAD -- csrc
ls torch_flashattn/_C*.so >/dev/null 2>&1 || (MAX_JOBS=8 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > /tmp/build_new.log 2>&1; echo "new build rc $?") &
if ! ls /tmp/t_base/torch_flashattn/_C*.so >/dev/null 2>&1; then
    rm -rf /tmp/t_base && mkdir -p /tmp/t_base
    tar -cf - setup.py pyproject.toml torch_flashattn tests tools bench | tar -xf - -C /tmp/t_base
    git archive HEAD csrc | tar -xf - -C /tmp/t_base
    (cd /tmp/t_base && rm -rf build torch_flashattn/_C*.so && MAX_JOBS=8 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > /tmp/build_base.log 2>&1; echo "base build rc $?")
fi
wait; echo "ready $(( $(date +%s) - t0 )) s"
for r in 1 2 3 4 5 6; do
    for b in $( [ $((r % 2)) = 1 ] && echo "base new" || echo "new base" ); do
        p=/tmp/t_base; [ $b = new ] && p=$PWD
        [ $(left 280) -lt 40 ] && break 2
        (cd $p && PYTHONPATH=$p timeout $(left 290) python3 tools/ab_variants.py $b sliding bottom-right padded varlen sinks softcap \
            >> $OUT/ab.jsonl 2>> $OUT/ab.err)
        echo "round $r $b $(( $(date +%s) - t0 )) s"
    done
done
tail -3 $OUT/ab.err
python3 bench/log/2026-12-06-third/ab_var_summary.py $OUT/ab.jsonl | tee $OUT/ab_summary.txt
