#!/usr/bin/env bash
# The score-limit fix on an H100 (branch score-limit, score_next.diff against main): the plain Hopper and
# sm_80 kernels take each exponential relative to the row max's exact m · c once |m · c| passes 2^20
# (log2 units). Run from the repository root of a main checkout (the diff is applied here) or of the
# score-limit branch (already applied: left as it is); $OUT as on the device machine. Steps and the
# time each should take (600 s in all; each step is cut off by what is left):
#   1. base (this tree without the diff's csrc/) copied to /tmp/score_base and built for sm_90a only,
#      beside the fixed tree's `pip install -e .` (every arch), MAX_JOBS=16 each      ~150 s
#   2. the new tests on the fixed build (test_values.py::test_huge_scores_plain_kernels, 48 cases;
#      test_sm90.py::test_sm90_huge_scores_never_a_silent_wrong_row, 4), all to pass; then the first
#      on the base build, where 36 of the 48 should fail (every fp16 case, bf16 at 1e10 and 1e20:
#      score_emu.py's arithmetic on CPU-drawn inputs of the same shape)                ~40 s
#   3. score_limit.py on the fixed build: no zero or non-finite row expected, "wrong" only where
#      bf16 rounds v itself past 0.02 (1 row at 1e6 before, worst 0.031)               ~40 s
#   4. A/B of the plain kernels, base and fixed in turn, 3 rounds each in its own process: ratio.py's
#      9 points on the automatic family (sm90) and 3 of them with family="sm80", do_bench medians
#      (ab.jsonl; the summary prints fixed / base per point)                         ~150 s
#   5. tests/test_sm90.py and test_forward.py's sm80 cases on the fixed build, 16 workers, in the
#      time left                                                                      ~120 s
#
#     OUT=<dir> bash bench/log/2026-12-06-alibi-v3/score_next_call.sh
set -uo pipefail
t0=$(date +%s); export MAX_JOBS=16 OMP_NUM_THREADS=1
left() { echo $(( ${1} - ($(date +%s) - t0) )); }
D=bench/log/2026-12-06-alibi-v3
DIFF=$D/score_next_csrc.diff   # csrc/ of score-limit against main (2af5891)
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | tee $OUT/gpu.txt
git log --oneline -1 | tee $OUT/head.txt

# 1. The two trees and their builds.
rm -rf /tmp/score_base && mkdir -p /tmp/score_base
tar -cf - csrc setup.py pyproject.toml torch_flashattn tests | tar -xf - -C /tmp/score_base
if git apply --reverse --check "$DIFF" 2>/dev/null; then
    (cd /tmp/score_base && git apply --reverse --include='csrc/*' "$OLDPWD/$DIFF") && echo "diff was applied here"
else
    git apply "$DIFF" && echo "diff applied"
fi
git diff --stat | tail -1
rm -f /tmp/score_base/torch_flashattn/_C*.so
(cd /tmp/score_base && FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > $OUT/build_base.log 2>&1; echo "base build rc $?") &
python3 -m pip install --no-build-isolation --no-deps -e . -q > $OUT/build.log 2>&1; echo "build rc $? $(( $(date +%s) - t0 )) s"
wait; echo "both built $(( $(date +%s) - t0 )) s"

# 2. The new tests: fixed build, then the first one on the base build (copied tests, run there).
NEW="tests/test_values.py::test_huge_scores_plain_kernels tests/test_sm90.py::test_sm90_huge_scores_never_a_silent_wrong_row"
timeout $(left 240) python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=line $NEW > $OUT/new_tests.txt 2>&1
echo "new tests rc $? $(( $(date +%s) - t0 )) s"; grep -E "passed|failed" $OUT/new_tests.txt | tail -1
cp tests/test_values.py tests/test_sm90.py /tmp/score_base/tests/
(cd /tmp/score_base && timeout $(left 280) python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=line \
    tests/test_values.py::test_huge_scores_plain_kernels > $OUT/new_tests_on_base.txt 2>&1)
echo "new test on base rc $? (failures expected) $(( $(date +%s) - t0 )) s"
grep -E "^FAILED" $OUT/new_tests_on_base.txt | sed 's/ - .*//' | head -40; grep -E "passed|failed" $OUT/new_tests_on_base.txt | tail -1

# 3. Where huge scores break now.
PYTHONPATH=$PWD timeout $(left 330) python3 $D/score_limit.py > $OUT/score_limit.txt 2>&1
echo "score_limit rc $? $(( $(date +%s) - t0 )) s"; cat $OUT/score_limit.txt

# 4. A/B of the plain kernels' speed.
cat > /tmp/score_ab.py <<'EOF'
"""Plain forward calls timed (do_bench medians), one JSON line each: ratio.py's 9 points on the
automatic family and 3 of them with family="sm80"; B · N = 16k, H · d = 2048.
    PYTHONPATH=<build> python3 /tmp/score_ab.py LABEL ROUND"""
import json, sys
import torch
from triton.testing import do_bench
import torch_flashattn
from torch_flashattn._testing import overrides
label, rnd = sys.argv[1], int(sys.argv[2])
points = [(torch.bfloat16, 64, 4096, True), (torch.bfloat16, 64, 4096, False), (torch.bfloat16, 128, 2048, True),
          (torch.bfloat16, 128, 4096, True), (torch.bfloat16, 128, 4096, False), (torch.bfloat16, 128, 8192, True),
          (torch.bfloat16, 128, 16384, False), (torch.bfloat16, 256, 4096, True), (torch.float16, 128, 8192, True)]
runs = [("auto", p) for p in points] + [("sm80", p) for p in (points[0], points[4], points[7])]
for family, (dt, d, N, causal) in runs:
    B, H = 16384 // N, 2048 // d
    g = torch.Generator(device="cuda").manual_seed(N + d)
    q, k, v = (torch.randn(B, H, N, d, dtype=dt, device="cuda", generator=g) for _ in range(3))
    with overrides(family=family):
        ms = do_bench(lambda: torch_flashattn.attention(q, k, v, causal=causal), warmup=25, rep=100)
    flops = 4 * B * H * N * N * d / (2 if causal else 1)
    print(json.dumps({"label": label, "round": rnd, "family": family, "dtype": str(dt)[6:], "d": d, "N": N,
                      "causal": causal, "ms": ms, "tflops": flops / ms / 1e9}), flush=True)
EOF
for r in 1 2 3; do
    for b in $( [ $((r % 2)) = 1 ] && echo "base new" || echo "new base" ); do
        [ $(left 500) -gt 20 ] || break 2
        if [ $b = base ]; then (cd /tmp && PYTHONPATH=/tmp/score_base timeout $(left 500) python3 /tmp/score_ab.py base $r >> $OUT/ab.jsonl 2>> $OUT/ab.err)
        else (cd /tmp && PYTHONPATH=$OLDPWD timeout $(left 500) python3 /tmp/score_ab.py new $r >> $OUT/ab.jsonl 2>> $OUT/ab.err); fi
    done
done
echo "A/B done $(( $(date +%s) - t0 )) s"; tail -3 $OUT/ab.err
python3 - $OUT/ab.jsonl <<'EOF' | tee $OUT/ab_summary.txt
import json, statistics, sys
from collections import defaultdict
t = defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    t[(r["family"], r["dtype"], r["d"], r["N"], r["causal"], r["label"])].append(r["tflops"])
for key in sorted({k[:5] for k in t}, key=str):
    b, n = t.get(key + ("base",), []), t.get(key + ("new",), [])
    if b and n:
        mb, mn = statistics.median(b), statistics.median(n)
        print(f"{key[0]:4s} {key[1]:8s} d {key[2]:3d} N {key[3]:5d} causal {int(key[4])} | base {mb:6.1f} new {mn:6.1f}"
              f" TFLOP/s | new/base {mn / mb:.3f} (rounds {len(b)}/{len(n)}; new {min(n):.1f}-{max(n):.1f})")
EOF

# 5. The Hopper file and the sm80 forward cases, in the time left.
[ $(left 580) -gt 30 ] && timeout $(left 590) python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short \
    tests/test_sm90.py tests/test_forward.py -k "sm90 or sm80" > $OUT/tests.txt 2>&1
echo "tests rc $? $(( $(date +%s) - t0 )) s"
grep -E "^FAILED|^ERROR" $OUT/tests.txt | head -20; grep -E "passed|failed" $OUT/tests.txt | tail -1
