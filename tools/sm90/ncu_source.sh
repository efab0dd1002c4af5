#!/usr/bin/env bash
# Nsight Compute's warp stall samples per SASS instruction of a Hopper kernel on one shape: the
# report under $OUT, the SASS source page as CSV, and tools/sm90/ncu_source.py's summary.
#   NCU_SHAPE="B H N d causal"   default 1 16 16384 128 0 (bf16; B·N = 16k, H·d = 2048 at the default)
#   NCU_KERNEL=forward           our forward kernel (the default)
#   NCU_KERNEL=backward          our Hopper backward's main kernel, under torch.autograd.grad
#   NCU_KERNEL=fa4-backward      FlashAttention-4's Hopper backward (flash_attn.cute, staged by
#                                ../shared/peers/; the same shape, its (B, N, H, d) layout)
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/ncu_env.sh
set -- ${NCU_SHAPE:-1 16 16384 128 0}
kind=${NCU_KERNEL:-forward}
tag="${kind}_d$4_n$3_c$5${NCU_TAG:-}"
case "$kind" in
forward) regex=fa_sm90_forward_kernel; export FA_KERNEL=sm90
    script="
import torch, torch_flashattn
q, k, v = (torch.randn($1, $2, $3, $4, dtype=torch.bfloat16, device='cuda') for _ in range(3))
for _ in range(3): torch_flashattn.attention(q, k, v, causal=bool($5))
torch.cuda.synchronize()" ;;
backward) regex=fa_sm90_backward_kernel
    script="
import torch, torch_flashattn
q, k, v, do = (torch.randn($1, $2, $3, $4, dtype=torch.bfloat16, device='cuda', requires_grad=i < 3) for i in range(4))
o = torch_flashattn.attention(q, k, v, causal=bool($5))
for _ in range(3): torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
torch.cuda.synchronize()" ;;
fa4-backward) regex=FlashAttentionBackwardSm90
    script="
import torch
from flash_attn.cute.interface import flash_attn_func
q, k, v, do = (torch.randn($1, $3, $2, $4, dtype=torch.bfloat16, device='cuda', requires_grad=i < 3) for i in range(4))
o = flash_attn_func(q, k, v, causal=bool($5))
o = o[0] if isinstance(o, tuple) else o
for _ in range(3): torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
torch.cuda.synchronize()" ;;
*) echo "NCU_KERNEL: forward, backward or fa4-backward, not $kind"; exit 2 ;;
esac
timeout 200 "$NCU" --kernel-name "regex:$regex" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section ComputeWorkloadAnalysis \
    --section InstructionStats -f -o "$OUT/ncu_src_$tag" python3 -c "$script" > "$OUT/ncu_src_$tag.log" 2>&1 \
    || { tail -20 "$OUT/ncu_src_$tag.log"; exit 1; }
"$NCU" -i "$OUT/ncu_src_$tag.ncu-rep" --page details --print-details all > "$OUT/ncu_src_${tag}_details.txt" 2>&1
"$NCU" -i "$OUT/ncu_src_$tag.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_src_${tag}_sass.csv" 2>&1
grep -iE "Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots|Stall|Warp Cycles Per|Eligible|Tensor|Pipe|Executed Instructions" \
    "$OUT/ncu_src_${tag}_details.txt" | head -60
python3 -m tools.sm90.ncu_source --segments "$OUT/ncu_src_${tag}_sass.csv"
