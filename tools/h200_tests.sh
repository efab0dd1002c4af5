#!/usr/bin/env bash
# The test files one at a time on the GPU machine, each under its own time limit (LIMIT seconds,
# default 90; test_extreme gets 2 × LIMIT), so that one slow file cannot hide the others' results.
# test_extreme runs in two passes: its tensors past 2³¹ elements (tens of GiB each, with their
# references) one at a time, the rest on 4 workers.
# Prints one summary line per file plus its failures; every log goes to $OUT/testlogs.tar.gz.
#
#     OUT=$OUT bash tools/h200_tests.sh [tests/test_x.py ...]
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
    if [ "$name" = test_extreme ]; then
        timeout "$limit" python3 -m pytest -q -n 4 -rfE --tb=short -p no:cacheprovider "$f" -k "not 2g" \
            > "$LOGS/$name.log" 2>&1
        rc=$?
        timeout "$limit" python3 -m pytest -q -rfE --tb=short -p no:cacheprovider "$f" -k "2g" \
            > "$LOGS/${name}_2g.log" 2>&1
        rc2=$?
        [ $rc2 -ne 0 ] && status=1
        echo "${name} (past 2^31, one at a time): rc $rc2, $(grep -E '[0-9]+ (passed|failed)' "$LOGS/${name}_2g.log" | tail -1)"
        grep -E "^(FAILED|ERROR|E  )" "$LOGS/${name}_2g.log" | head -6 | cut -c1-260
    else
        timeout "$limit" python3 -m pytest -q -n 16 -rfE --tb=short -p no:cacheprovider "$f" > "$LOGS/$name.log" 2>&1
        rc=$?
    fi
    [ $rc -ne 0 ] && status=1
    echo "$name: rc $rc, $(( $(date +%s) - t0 )) s, $(grep -E '[0-9]+ (passed|failed)' "$LOGS/$name.log" | tail -1)"
    grep -E "^(FAILED|ERROR)" "$LOGS/$name.log" | head -6 | cut -c1-260
done
tar -czf "$OUT/testlogs.tar.gz" -C "$LOGS" .
exit $status
