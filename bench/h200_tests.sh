#!/usr/bin/env bash
# The test files one at a time on the GPU machine, each under its own time limit (LIMIT seconds,
# default 90; test_extreme gets 2 × LIMIT), so that one slow file cannot hide the others' results.
# Prints one summary line per file plus its failures; every log goes to $OUT/testlogs.tar.gz.
#
#     OUT=$OUT bash bench/h200_tests.sh [tests/test_x.py ...]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
LOGS=$(mktemp -d)
LIMIT=${LIMIT:-90}
files=("$@")
[ ${#files[@]} -eq 0 ] && files=($(ls tests/test_*.py | grep -v test_extreme) tests/test_extreme.py)
status=0
for f in "${files[@]}"; do
    name=$(basename "$f" .py)
    limit=$LIMIT
    [ "$name" = test_extreme ] && limit=$((2 * LIMIT))
    t0=$(date +%s)
    workers=16
    [ "$name" = test_extreme ] && workers=2     # its big cases need most of the GPU memory each
    timeout "$limit" python3 -m pytest -q -n $workers -rfE --tb=short -p no:cacheprovider "$f" > "$LOGS/$name.log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && status=1
    echo "$name: rc $rc, $(( $(date +%s) - t0 )) s, $(grep -E '[0-9]+ (passed|failed)' "$LOGS/$name.log" | tail -1)"
    grep -E "^(FAILED|ERROR)" "$LOGS/$name.log" | head -6 | cut -c1-260
done
tar -czf "$OUT/testlogs.tar.gz" -C "$LOGS" .
exit $status
