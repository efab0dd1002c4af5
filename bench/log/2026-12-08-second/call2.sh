# Call 2 (device tool, no carry): the Hopper backward with each step's −D loaded before its Q / dO stage
# wait (FA_SM90_BWD_D_EARLY=1, in a copy of the tree under /tmp/dearly) against this tree, both built for
# sm_90a side by side; the copy's sm90 backward tests; then bwd_time.py on each, three rounds alternating,
# and the two builds' gradients compared (the same bits expected: only the loads' place moves).
#   LIMIT=585 bash bench/log/2026-12-08-second/call2.sh
set -u
t0=$(date +%s)
LIMIT=${LIMIT:-585}
L=$PWD/bench/log/2026-12-08-second
left() { echo $(( LIMIT - $(date +%s) + t0 )); }
export OMP_NUM_THREADS=1 FA_CUDA_ARCHS=90a MAX_JOBS=8
{ nvidia-smi --query-gpu=name,power.limit --format=csv,noheader; git log --oneline -1; } > $OUT/times2.txt
rm -rf /tmp/dearly && mkdir -p /tmp/dearly && git archive HEAD | tar -x -C /tmp/dearly
sed -i 's/^#define FA_SM90_BWD_D_EARLY 0$/#define FA_SM90_BWD_D_EARLY 1/' /tmp/dearly/csrc/cuda/sm90_backward.cu
grep -c "define FA_SM90_BWD_D_EARLY 1" /tmp/dearly/csrc/cuda/sm90_backward.cu >> $OUT/times2.txt
(cd /tmp/dearly && python3 setup.py build_ext --inplace > $OUT/build_dearly.txt 2>&1) &
python3 setup.py build_ext --inplace > $OUT/build_base.txt 2>&1
wait
echo "builds $(( $(date +%s)-t0 )) s" >> $OUT/times2.txt
(cd /tmp/dearly && PYTHONPATH=/tmp/dearly timeout 200 python3 -m pytest -q -n 16 -p no:cacheprovider -rfE --tb=short \
  tests/test_backward_kernel.py -k sm90 > $OUT/tests2.txt 2>&1)
echo "tests rc $? $(( $(date +%s)-t0 )) s" >> $OUT/times2.txt
mkdir -p /tmp/g_base /tmp/g_dearly
for r in 1 2 3; do
  [ $(left) -lt 60 ] && break
  PYTHONPATH=$PWD SAVE=$([ $r = 1 ] && echo /tmp/g_base) timeout $(( $(left) - 5 )) python3 $L/bwd_time.py base$r >> $OUT/bwd.jsonl 2>> $OUT/bwd.err
  PYTHONPATH=/tmp/dearly SAVE=$([ $r = 1 ] && echo /tmp/g_dearly) timeout $(( $(left) - 5 )) python3 $L/bwd_time.py dearly$r >> $OUT/bwd.jsonl 2>> $OUT/bwd.err
done
echo "timing $(( $(date +%s)-t0 )) s" >> $OUT/times2.txt
python3 -c "
import glob, os, torch
for f in sorted(glob.glob('/tmp/g_base/*.pt')):
    a, b = torch.load(f), torch.load('/tmp/g_dearly/' + os.path.basename(f))
    print(os.path.basename(f), 'same bits' if all(torch.equal(x, y) for x, y in zip(a, b)) else 'DIFFER')
" >> $OUT/times2.txt 2>&1
cat $OUT/times2.txt; tail -3 $OUT/tests2.txt; tail -3 $OUT/bwd.err
python3 -c "
import json, statistics, collections
t = collections.defaultdict(list)
for l in open('$OUT/bwd.jsonl'):
    r = json.loads(l); t[(r['point'], r['label'].rstrip('0123456789'), r['who'])].append(r['tflops'])
for p in dict.fromkeys(k[0] for k in t):
    b, n = statistics.median(t[(p, 'base', 'fa')]), statistics.median(t.get((p, 'dearly', 'fa'), [0]))
    c = statistics.median(t[(p, 'base', 'sdpa-cudnn')])
    print(f'{p:22s} base {b:6.1f} dearly {n:6.1f} ({n / b:.3f}) cudnn {c:6.1f}')
"
