#!/usr/bin/env bash
# Nsight Compute's warp stall samples per SASS instruction of the Hopper kernel on one shape
# (default: bf16, d = 128, N = 16k, non-causal, B·N = 16k, H·d = 2048): the report under $OUT,
# the SASS source page as CSV, and tools/sm90/ncu_source.py's summary.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/ncu_env.sh
set -- ${NCU_SHAPE:-1 16 16384 128 0}
tag="d$4_n$3_c$5${NCU_TAG:-}"
FA_KERNEL=sm90 timeout 200 "$NCU" --kernel-name regex:fa_sm90_forward_kernel --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section ComputeWorkloadAnalysis \
    -f -o "$OUT/ncu_src_$tag" python3 -c "
import torch, torch_flashattn
q, k, v = (torch.randn($1, $2, $3, $4, dtype=torch.bfloat16, device='cuda') for _ in range(3))
for _ in range(3): torch_flashattn.attention(q, k, v, causal=bool($5))
torch.cuda.synchronize()" > "$OUT/ncu_src_$tag.log" 2>&1 || { tail -20 "$OUT/ncu_src_$tag.log"; exit 1; }
"$NCU" -i "$OUT/ncu_src_$tag.ncu-rep" --page details --print-details all > "$OUT/ncu_src_${tag}_details.txt" 2>&1
"$NCU" -i "$OUT/ncu_src_$tag.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_src_${tag}_sass.csv" 2>&1
grep -iE "Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots|Stall|Warp Cycles Per|Eligible|Tensor|Pipe" \
    "$OUT/ncu_src_${tag}_details.txt" | head -60
python3 -m tools.sm90.ncu_source "$OUT/ncu_src_${tag}_sass.csv"
