#!/usr/bin/env bash
# Nsight Compute (--set full) on the split-KV decode kernel (csrc/cuda/decode.cu): the attend launch
# of one bf16 d = 128 decoding step on shapes of bench/decode.py's table, the full details page
# under $OUT/ncu_decode_*.txt and its key metrics printed: the third call's attend kernel
# (fa_decode_attend_kernel; the combine kernel, where the splits are not merged in clusters, is not
# counted).
#
#     OUT=$OUT bash tools/decode_ncu.sh ["1 32 32 4096" "8 32 8 8192" ...]   # B Hq Hkv Nk
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/ncu_env.sh
[ $# -eq 0 ] && set -- "1 32 32 4096" "8 32 8 8192"
for shape in "$@"; do
    set -- $shape
    tag="decode_b$1_h$2-$3_n$4"
    timeout 150 "$NCU" --kernel-name regex:fa_decode_attend_kernel --launch-skip 2 --launch-count 1 --set full \
        python3 -c "
import torch, torch_flashattn
q = torch.randn($1, $2, 1, 128, dtype=torch.bfloat16, device='cuda')
k, v = (torch.randn($1, $3, $4, 128, dtype=torch.bfloat16, device='cuda') for _ in range(2))
for _ in range(3): torch.ops.fa.forward_kvcache(q, k, v, None, None, None, None, False)
torch.cuda.synchronize()" > "$OUT/ncu_$tag.txt" 2>&1
    echo "== $tag"
    grep -E "^  fa_decode_|Duration|Grid Size|Cluster Size|Achieved Occupancy|DRAM Throughput|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|SM Active Cycles|Elapsed Cycles" \
        "$OUT/ncu_$tag.txt" | head -40
done
