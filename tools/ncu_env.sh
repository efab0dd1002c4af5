# Sourced from the repository root by the Nsight Compute scripts (tools/decode_ncu.sh,
# tools/sm90/ncu*.sh, tools/sm80/ncu_compare.sh): OUT (default /tmp/out) and NCU, the ncu binary,
# or exit when there is none.
OUT=${OUT:-/tmp/out}
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
[ -z "$NCU" ] && { echo "no ncu"; exit 1; }
