#!/usr/bin/env bash
# Nsight Compute on the split-KV decode kernels (csrc/fa_decode.cu): the attend and combine launches
# of one bf16 d = 128 decoding step on three shapes of bench/decode.py's table, key metrics as text
# under $OUT/ncu_decode_*.txt.
#
#     OUT=$OUT bash bench/decode_ncu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/ncu_env.sh
for shape in "1 32 32 32768" "8 32 8 32768" "1 32 32 4096"; do
    set -- $shape
    tag="decode_b$1_h$2-$3_n$4"
    # Three calls of two launches each (attend, combine): the third call's pair is profiled.
    timeout 150 "$NCU" --kernel-name regex:decode_ --launch-skip 4 --launch-count 2 --set full \
        python3 -c "
import torch, torch_flashattn
q = torch.randn($1, $2, 1, 128, dtype=torch.bfloat16, device='cuda')
k, v = (torch.randn($1, $3, $4, 128, dtype=torch.bfloat16, device='cuda') for _ in range(2))
for _ in range(3): torch.ops.fa.forward_kvcache(q, k, v, None, None, None, None, False)
torch.cuda.synchronize()" > "$OUT/ncu_$tag.txt" 2>&1
    echo "== $tag"
    grep -E "^  decode_|Duration|Grid Size|Registers Per|Achieved Occupancy|Memory Throughput|DRAM Throughput|L2 Hit|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Waves Per SM" \
        "$OUT/ncu_$tag.txt" | head -40
done
