#!/usr/bin/env bash
# Nsight Compute on the Hopper kernel: one d=128 N=8k non-causal call and one d=64 N=512 causal
# call (the weakest grid point), key metrics as text under $OUT/ncu_*.txt. NCU_SHAPES replaces the
# shapes ("B H N d causal", ;-separated), NCU_TAG is added to the file names (e.g. with
# a different build).
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/ncu_env.sh
IFS=';' read -r -a shapes <<< "${NCU_SHAPES:-2 16 8192 128 0;32 32 512 64 1}"
for shape in "${shapes[@]}"; do
    set -- $shape
    tag="d$4_n$3_c$5${NCU_TAG:-}"
    FA_KERNEL=sm90 timeout 120 "$NCU" --kernel-name regex:fa_sm90_forward_kernel --launch-skip 2 --launch-count 1 --set full \
        python3 -c "
import torch, torch_flashattn
q, k, v = (torch.randn($1, $2, $3, $4, dtype=torch.bfloat16, device='cuda') for _ in range(3))
for _ in range(3): torch_flashattn.attention(q, k, v, causal=bool($5))
torch.cuda.synchronize()" > "$OUT/ncu_$tag.txt" 2>&1
    echo "== $tag"; grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|Executed Ipc A|No Eligible|Warp Cycles Per Issued|Stall|L2 Hit|DRAM Throughput|Tensor" "$OUT/ncu_$tag.txt" | head -30
done
