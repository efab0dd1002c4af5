# The variant rule built (plan.c: pairs for causal calls with a softcap, ALiBi, sinks or bottom-right
# alignment from 4097 to 8192 keys): the whole suite, then the automatic grid against one CTA per tile
# in turn (at 8k the rule's pairs; at 4k and 16k the same grid as before).
export FA_GIT_COMMIT=${FA_GIT_COMMIT:-unset}
(time MAX_JOBS=16 python3 setup.py build_ext --inplace > $OUT/build.log 2>&1) 2>&1 | grep real; echo build=${PIPESTATUS[0]}
timeout 400 bash tests/gpu.sh > $OUT/suite.log 2>&1; echo suite rc=$?; grep -E "passed|failed" $OUT/suite.log | tail -4
for v in alibi sinks; do
  VARIANT=$v GRIDS=auto,tile timeout 60 python3 bench/log/2026-12-05-pairs/grid_ab.py 3 > $OUT/grid_ab_$v.jsonl 2>$OUT/grid_ab_$v.err; echo $v rc=$?
  python3 bench/log/2026-12-05-pairs/grid_sum.py $OUT/grid_ab_$v.jsonl
done
