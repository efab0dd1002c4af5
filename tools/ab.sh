#!/usr/bin/env bash
# Before/after timing of two builds in one GPU session: builds the sources of BASE (a tarball of
# an earlier tree, e.g. `git archive -o base.tar <commit> csrc setup.py pyproject.toml torch_flashattn`)
# in place under /tmp/ab_base and this tree in place, then runs tools/ab_time.py on each, ROUNDS
# times alternating. One JSON line per run in $OUT/ab.jsonl.
#
#     BASE=base.tar OUT=$OUT bash tools/ab.sh          # ONLY=d256_n8192: those forward points alone
#     TIMER=tools/ab_variants.py: the variant calls (tools/ab_variants.py) instead of the plain ones
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
export MAX_JOBS=${MAX_JOBS:-16}
rm -rf /tmp/ab_base && mkdir -p /tmp/ab_base && tar -xf "$BASE" -C /tmp/ab_base
(cd /tmp/ab_base && python3 setup.py build_ext --inplace > /tmp/ab_base_build.log 2>&1) &
python3 setup.py build_ext --inplace > /tmp/ab_new_build.log 2>&1
wait
for r in $(seq "$ROUNDS"); do
    PYTHONPATH=/tmp/ab_base python3 ${TIMER:-tools/ab_time.py} "base$r" ${ONLY:-} >> "$OUT/ab.jsonl"
    PYTHONPATH=$PWD python3 ${TIMER:-tools/ab_time.py} "new$r" ${ONLY:-} >> "$OUT/ab.jsonl"
done
