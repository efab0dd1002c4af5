#!/usr/bin/env bash
# Call 5 (carries .peers/fa4b, same warm machine): FA4 installed (its first half stashed in call 3), FA3
# from call 4 on the path; the variants table (bench.variants, providers in turn). Call 6 runs it again.
set -uo pipefail
t0=$(date +%s)
if [ ! -d /tmp/fa-peers-fa4 ]; then source .peers/fa4b/peers.sh install-fa4 > $OUT/fa4.txt 2>&1; tail -1 $OUT/fa4.txt; fi
export PYTHONPATH=$PWD:/tmp/fa-peers-fa3:/tmp/fa-peers-fa4:/tmp/fa-peers-fa4/nvidia_cutlass_dsl/dsl_packages:${PYTHONPATH:-}
python3 -c "import fa3_fwd_interface, flash_attn.cute.interface; print('peers importable')"
timeout ${VAR_T:-420} python3 -m bench.variants --out $OUT/variants > $OUT/variants.log 2>&1; echo "variants rc $?"
tail -20 $OUT/variants.log
echo "call: $(( $(date +%s) - t0 )) s"
