#!/usr/bin/env bash
# Second call on the machine call_one.sh left warm (FA3 installed under /tmp, this tree built): the
# variants table (bench.variants, providers in turn; FA3 where it has the variant, no FA4).
set -uo pipefail
t0=$(date +%s)
export PYTHONPATH=$PWD:/tmp/fa-peers-fa3:${PYTHONPATH:-}
python3 -c "import fa3_fwd_interface; print('fa3 importable')"
timeout 400 python3 -m bench.variants --out $OUT/variants > $OUT/variants.log 2>&1; echo "variants rc $?"
tail -22 $OUT/variants.log
echo "call: $(( $(date +%s) - t0 )) s"
