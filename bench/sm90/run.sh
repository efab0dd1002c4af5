#!/usr/bin/env bash
# The Hopper kernel on the H200 after a build: SASS census, smoke check, its tests, a timing grid.
#   OUT=$OUT bash bench/sm90/run.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}
so=$(python3 -c "import torch_flashattn._C as m; print(m.__file__)")
echo "== SASS of the sm_90a kernels (instruction counts)"
cuobjdump -sass "$so" 2>/dev/null | grep -oE "(HGMMA|HMMA|UTMALDG|UTMASTG|LDL|STL|USETMAXREG)[.A-Z0-9x_]*" \
    | sort | uniq -c | sort -rn | head -24
for ov in 1 0; do
    echo "== smoke, FA_SM90_OVERLAP=$ov"
    FA_SM90_OVERLAP=$ov FA_KERNEL=sm90 timeout 90 python3 bench/sm90/smoke.py || { echo "smoke failed or hung"; exit 1; }
done
echo "== tests/test_sm90.py"
timeout 200 python3 -m pytest -q -x -n 8 tests/test_sm90.py 2>&1 | tail -8
echo "== timing"
timeout 200 python3 -m bench.attention --device cuda --providers fa-sm90 fa-sm80 sdpa-flash sdpa-cudnn \
    --dtype bf16 --d 64 128 256 --n 1k 4k 16k --causal both --budget 0.1 --out "$OUT/sm90grid" 2>&1 | tail -45
echo "== timing, FA_SM90_OVERLAP=0"
FA_SM90_OVERLAP=0 timeout 100 python3 -m bench.attention --device cuda --providers fa-sm90 \
    --dtype bf16 --d 64 128 256 --n 1k 4k 16k --causal both --budget 0.1 --out "$OUT/sm90grid_v1" 2>&1 | tail -25
