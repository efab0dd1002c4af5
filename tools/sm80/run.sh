#!/bin/bash
# Builds tools/sm80/tune.cu (one nvcc per tile variant, in parallel, plus the production unit),
# prints registers and spills per kernel, measures SDPA flash/cudnn on the same
# grid when torch is there, and runs the checks and timings. On the H200, from the repo root:
#
#     bash tools/sm80/run.sh 2>&1 | tee $OUT/tune.log
#
# BUILD (default /tmp/sm80_tune) holds the objects, ptxas logs and the binary; extra arguments
# go to the binary (e.g. --reps 50).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-/tmp/sm80_tune}
mkdir -p "$BUILD"
FLAGS=(-std=c++17 -O3 -DNDEBUG -gencode arch=compute_90a,code=sm_90a -Icsrc -Xptxas -v)
N_VARIANTS=$(grep -cE '^ +X\([0-9]+, sm80_tile<' tools/sm80/tune.cu)

start=$(date +%s)
pids=()
for i in $(seq 0 $((N_VARIANTS - 1))); do
    nvcc "${FLAGS[@]}" -DTUNE_PART="$i" -c tools/sm80/tune.cu -o "$BUILD/part$i.o" 2> "$BUILD/part$i.log" &
    pids+=($!)
done
nvcc "${FLAGS[@]}" -c tools/sm80/tune.cu -o "$BUILD/main.o" 2> "$BUILD/main.log" &
pids+=($!)
# What the kernel file needs beside itself: status strings and the recorded CUDA error, device info.
support=()
for src in csrc/fa_common.c csrc/cuda/device.c csrc/cuda/plan.c; do
    [ -f "$src" ] || continue
    obj="$BUILD/$(basename "$src" .c).o"
    nvcc -O3 -DNDEBUG -DFA_WITH_CUDA -Icsrc -c "$src" -o "$obj" 2> "$BUILD/$(basename "$src" .c).log" &
    pids+=($!)
    support+=("$obj")
done
status=0
for pid in "${pids[@]}"; do
    wait "$pid" || status=1
done
if [ "$status" -ne 0 ]; then
    grep -h -B2 -A2 error "$BUILD"/*.log >&2
    exit 1
fi
objs=("$BUILD/main.o" "${support[@]}")
for i in $(seq 0 $((N_VARIANTS - 1))); do objs+=("$BUILD/part$i.o"); done
nvcc -gencode arch=compute_90a,code=sm_90a "${objs[@]}" -o "$BUILD/tune"
echo "build: $(( $(date +%s) - start )) s, $N_VARIANTS variants"

# Registers and spills of every kernel (function name shortened to its template arguments).
for log in "$BUILD"/main.log "$BUILD"/part*.log; do
    awk -v f="$(basename "$log" .log)" '
        /Compiling entry function/ { match($0, /function .[^'"'"']*/); name = substr($0, RSTART + 10, RLENGTH - 10)
                                     sub(/^_Z[0-9]+fa_sm80_[a-z_]*kernelI/, "", name) }
        /spill stores/ { spill = $5 " B spill stores, " $9 " B spill loads" }
        /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); print f ": " name ": " substr($0, RSTART, RLENGTH) ", " spill }
    ' "$log"
done

REF=()
if python3 -c "import torch; assert torch.cuda.is_available()" 2> /dev/null; then
    python3 tools/sm80/sdpa.py > "$BUILD/sdpa.txt" && REF=(--ref "$BUILD/sdpa.txt")
fi
"$BUILD/tune" "${REF[@]}" "$@"
