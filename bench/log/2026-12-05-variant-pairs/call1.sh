export FA_GIT_COMMIT=3a86802
(MAX_JOBS=16 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace > $OUT/build.log 2>&1); echo build=$?
for v in softcap sinks bottom_right; do
  VARIANT=$v GRIDS=auto,pairs timeout 100 python3 bench/log/2026-12-05-pairs/grid_ab.py 3 > $OUT/grid_ab_$v.jsonl 2>$OUT/grid_ab_$v.err; echo $v rc=$?
done
for v in softcap sinks bottom_right; do echo "== $v"; python3 bench/log/2026-12-05-pairs/grid_sum.py $OUT/grid_ab_$v.jsonl; done
for t in memcheck racecheck; do
  SANITIZE_ONLY=sm90 timeout 170 bash tests/sanitize.sh $t > $OUT/san_$t.txt 2>&1; echo san $t rc=$?; tail -4 $OUT/san_$t.txt; cp /tmp/sanitize_$t.log $OUT/ 2>/dev/null
done
