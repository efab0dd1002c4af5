#!/usr/bin/env bash
# GPU call: the tests touched by the split-KV routing, the long-keys accuracy table, examples, decode.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export MAX_JOBS=16 PYTHONUNBUFFERED=1
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
stamp build; python3 -m pip install --no-build-isolation --no-deps -e . -q 2>&1 | grep -i error | head -5
stamp extreme; timeout 200 python3 -m pytest -q -n 6 -rfE --tb=short -p no:cacheprovider -k "not 2g_elements" tests/test_extreme.py tests/test_dropin.py > $OUT/extreme.log 2>&1; tail -3 $OUT/extreme.log
stamp 2g; timeout 150 python3 -m pytest -q -n 2 -rfE --tb=short -p no:cacheprovider -k "2g_elements" tests/test_extreme.py > $OUT/extreme_2g.log 2>&1; grep -E "^(FAILED|E  )|passed|failed" $OUT/extreme_2g.log | cut -c1-250 | tail -12
stamp long_keys; timeout 90 python3 -m tools.long_keys 2>&1 | tee $OUT/long_keys.txt
stamp examples; for e in examples/*.py; do echo "== $e"; timeout 100 python3 "$e" 2>&1 | grep -v -i warn; done > $OUT/examples.log 2>&1; cat $OUT/examples.log
stamp decode; timeout 120 python3 -m bench.decode --out $OUT/decode 2>&1 | tail -25
stamp done
