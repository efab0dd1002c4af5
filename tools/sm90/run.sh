#!/usr/bin/env bash
# The Hopper kernel on the H200 after a build: SASS census (HGMMA, TMA, no local memory), smoke
# check, its tests, and the tile sweep of tools/sm90/tune.py.
#
#     OUT=$OUT bash tools/sm90/run.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}
so=$(python3 -c "import torch_flashattn._C as m; print(m.__file__)")
echo "== SASS of the sm_90a kernels (instruction counts)"
# Every function of the library, then only the sections of the (mangled) fa_sm90_*_kernel instances.
cuobjdump -sass "$so" 2>/dev/null | awk '/Function : /{keep = /fa_sm90_[a-z_]*kernel/} keep' \
    | grep -oE "(HGMMA|HMMA|UTMALDG|UTMASTG|LDL|STL|USETMAXREG)[.A-Z0-9x_]*" | sort | uniq -c | sort -rn | head -24
echo "== smoke"
timeout 90 python3 -m tools.sm90.smoke || { echo "smoke failed or hung"; exit 1; }
echo "== tests/test_sm90.py"
timeout 200 python3 -m pytest -q -x -n 8 tests/test_sm90.py 2>&1 | tail -3
echo "== tile sweep"
timeout 300 python3 -m tools.sm90.tune --n 512 1k 2k 4k 16k ${TUNE_ARGS:-} 2>&1 | tee "$OUT/sm90tune.log" | tail -40
