#!/usr/bin/env bash
# One device call: the fp16 cost of the exact exponents (LOG 2026-12-06-score) against the SM clock
# and board power. Builds this tree ("new") and this tree with score_csrc.diff reversed ("base") for
# sm_90a side by side, then clocks.py on each in alternated processes, four rounds.
#     OUT=<dir> bash bench/log/2026-12-06-third/clocks.sh
set -uo pipefail
t0=$(date +%s); export OMP_NUM_THREADS=1
D=bench/log/2026-12-06-third
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
rm -rf /tmp/t_base build torch_flashattn/_C*.so && mkdir -p /tmp/t_base
tar -cf - csrc setup.py pyproject.toml torch_flashattn | tar -xf - -C /tmp/t_base
(cd /tmp/t_base && git apply --reverse --include='csrc/*' $OLDPWD/bench/log/2026-12-06-score/score_csrc.diff && echo "base: score_csrc.diff reversed")
(cd /tmp/t_base && MAX_JOBS=8 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > /tmp/build_base.log 2>&1; echo "base build rc $?") &
(MAX_JOBS=8 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > /tmp/build_new.log 2>&1; echo "new build rc $?") &
wait; echo "built $(( $(date +%s) - t0 )) s"
cp $D/clocks.py /tmp/clocks.py
for r in 1 2 3 4; do
    for b in $( [ $((r % 2)) = 1 ] && echo "base new" || echo "new base" ); do
        p=/tmp/t_base; [ $b = new ] && p=$PWD
        (cd /tmp && PYTHONPATH=$p timeout 120 python3 /tmp/clocks.py $b $r >> $OUT/clocks.jsonl 2>> $OUT/clocks.err)
    done
done
echo "done $(( $(date +%s) - t0 )) s"; tail -3 $OUT/clocks.err
python3 - $OUT/clocks.jsonl <<'PY'
import json, sys, statistics as st
from collections import defaultdict
t = defaultdict(list)
for l in open(sys.argv[1]):
    r = json.loads(l); t[(r["dtype"], r["d"], r["label"])].append(r)
print("| dtype | d | build | TFLOP/s | SM MHz | W | rounds TFLOP/s |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for k in sorted(t):
    v = t[k]
    rounds = " ".join("%.0f" % x["tflops"] for x in v)
    print(f"| {k[0]} | {k[1]} | {k[2]} | {st.median(x['tflops'] for x in v):.1f} | {st.median(x['clock_mhz'] for x in v):.0f} "
          f"| {st.median(x['power_w'] for x in v):.0f} | {rounds} |")
PY
