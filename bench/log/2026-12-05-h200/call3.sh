#!/usr/bin/env bash
# Call 3 (H200, 2026-12-05), on the machine call 2 left warm: fix/cuda-mask-limit built in the repo
# root; exp/sm80-bwd-load-late (main plus the sm_80 backward's five versions, FA_EXP_BWD80; its
# forward kernels are main's) built in _dev/exp, copied to /tmp/expbuild.
# 1. The T5-bias points of bench.variants (a bf16 attn_mask, the Hopper kernel's staged mask): the
#    fix's build, then main's kernels, each in its own process.
# 2. exp_ab.sh's steps without its build: each version's sm_80 bf16 gradient tests, then
#    bwd80_ab.py (ours forced sm_80 and SDPA flash in turn, one process per version), a second
#    round of the five only while the call is under 330 s.
set -uo pipefail
t0=$(date +%s)
E=_dev/exp; [ -f $E/exp_ab.sh ] && ls $E/torch_flashattn/_C*.so > /dev/null 2>&1 || E=/tmp/expbuild
ls torch_flashattn/_C*.so $E/torch_flashattn/_C*.so || exit 1
timeout 100 python3 -m bench.variants --only T5 --out $OUT/mask_fix > $OUT/mask_fix.log 2>&1
(cd $E && timeout 100 python3 -m bench.variants --only T5 --out $OUT/mask_main > $OUT/mask_main.log 2>&1)
echo "mask A/B: $(( $(date +%s) - t0 )) s"
cd $E
K="(sm80 and bfloat16 and (plain or causal or window or sinks) and not softcap and not alibi and not key_mask and not combo) or (long and sm80)"
for e in 1 2 3 4; do
  FA_EXP_BWD80=$e timeout 90 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_backward_kernel.py -k "$K" 2>&1 \
    | tail -1 | sed "s/^/EXP $e tests: /"
done > $OUT/exp_tests.txt
echo "tests: $(( $(date +%s) - t0 )) s"
AB=bench/log/2026-12-04-sm80-bwd-layout/bwd80_ab.py
for r in 1 2; do
  [ $r = 2 ] && [ $(( $(date +%s) - t0 )) -gt 330 ] && break
  for e in 0 1 2 3 4; do
    FA_EXP_BWD80=$e AB_N="4096 16384" PYTHONPATH=$PWD timeout 60 python3 $AB E${e}_$r
  done
done > $OUT/ab_exp.jsonl 2> $OUT/ab_exp.err
tail -3 $OUT/ab_exp.err
python3 - <<'PY'
import json, os, glob, collections, math
for f in sorted(glob.glob(os.environ["OUT"] + "/mask_*.json")):
    for r in json.load(open(f))["rows"]:
        t = r["tflops"]
        print(os.path.basename(f), r["point"], "fa", round(t["fa"]), "dense", round(t["fa dense"]),
              "cudnn", round(t.get("sdpa-cudnn", 0)), "err", r["max_err_vs_exact"])
rows = [json.loads(l) for l in open(os.environ["OUT"] + "/ab_exp.jsonl")]
by = collections.defaultdict(dict)
for r in rows: by[(r["d"], r["causal"], r["N"])][r["label"]] = r
gm = collections.defaultdict(list)
for key, v in sorted(by.items()):
    print(key, " ".join(f"{l}:{v[l]['tflops']}/{v[l]['ratio']}" for l in sorted(v)))
    for l in v: gm[(key[0], l)].append(math.log(v[l]["ratio"]))
for l, xs in sorted(gm.items()): print(l, "geomean ours/flash", round(math.exp(sum(xs)/len(xs)), 4), len(xs))
PY
cat $OUT/exp_tests.txt
echo "call: $(( $(date +%s) - t0 )) s"
