#!/usr/bin/env bash
# One device call: exact exponents in the Turing kernel (turing_exact.diff, applied uncommitted
# before the call: git apply bench/log/2026-12-06-fourth/next/turing_exact.diff). Base: HEAD's csrc.
# Both built for sm_90a (turing.cu as compute_75 PTX, JIT on the device). Base and new:
# test_huge_scores_plain_kernels; new: test_values.py and test_random.py -k turing; then
# turing_time.py, alternated rounds.
#     OUT=<dir> bash bench/log/2026-12-06-fourth/next/call.sh
set -uo pipefail
t0=$(date +%s); export OMP_NUM_THREADS=1
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
N=bench/log/2026-12-06-fourth/next
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
    (cd $p && timeout 90 python3 -m pytest -q -p no:cacheprovider --tb=line tests/test_values.py -k huge_scores_plain \
        > $OUT/huge_$t.txt 2>&1); echo "$t huge tests: $(tail -1 $OUT/huge_$t.txt)"
done
grep -o "FAILED [^ ]*" $OUT/huge_base.txt | sed 's/.*\[//' | sort > $OUT/base_failed.txt
timeout $(left 420) python3 -m pytest -q -n 8 -p no:cacheprovider -rfE --tb=short tests/test_values.py tests/test_random.py \
    -k "turing and not gradients" > $OUT/tests_new.txt 2>&1
rc=$?; echo "new tests rc $rc $(( $(date +%s) - t0 )) s: $(tail -1 $OUT/tests_new.txt)"
[ $rc -ne 0 ] && { grep -E "^FAILED" $OUT/tests_new.txt | head; exit 1; }
for r in 1 2 3 4; do
    for b in $( [ $((r % 2)) = 1 ] && echo "base new" || echo "new base" ); do
        p=/tmp/t_base; [ $b = new ] && p=$PWD
        [ $(left 560) -lt 30 ] && break 2
        (cd $p && PYTHONPATH=$p timeout $(left 580) python3 $PWD/$N/turing_time.py $b >> $OUT/turing.jsonl 2>> $OUT/turing.err)
        echo "round $r $b $(( $(date +%s) - t0 )) s"
    done
done
python3 - $OUT/turing.jsonl <<'PY' | tee $OUT/turing_summary.txt
import json, statistics, sys
from collections import defaultdict
t = defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    for k, x in r["tflops"].items():
        t[(k, r["label"])].append(x)
for k in sorted({k for k, _ in t}):
    b, n = t[(k, "base")], t[(k, "new")]
    if b and n:
        print(f"{k}: base {statistics.median(b):.1f} new {statistics.median(n):.1f} new/base {statistics.median(n) / statistics.median(b):.3f}")
PY
