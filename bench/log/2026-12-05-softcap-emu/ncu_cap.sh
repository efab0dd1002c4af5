#!/usr/bin/env bash
# Nsight Compute on the Hopper kernel with and without a softcap (30), bf16, B · N = 16k, H · d = 2048,
# non-causal 4k keys, d = 128 and 64: the raw metrics of each under $OUT/ncu_<tag>.txt, and a
# digest of the pipes and stalls printed.
#
#     MAX_JOBS=16 FA_CUDA_ARCHS=90a python3 setup.py build_ext --inplace && bash bench/log/2026-12-05-softcap-emu/ncu_cap.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
source tools/ncu_env.sh
for shape in "4 16 4096 128 0" "4 16 4096 128 30" "4 32 4096 64 0" "4 32 4096 64 30"; do
    set -- $shape
    tag="d$4_cap$5"
    timeout 150 "$NCU" --kernel-name regex:fa_sm90_forward_kernel --launch-skip 2 --launch-count 1 --set full --page raw \
        python3 -c "
import torch, torch_flashattn
q, k, v = (torch.randn($1, $2, $3, $4, dtype=torch.bfloat16, device='cuda') for _ in range(3))
cap = $5 or None
for _ in range(3): torch_flashattn.attention(q, k, v, softcap=cap)
torch.cuda.synchronize()" > "$OUT/ncu_$tag.txt" 2>&1
    echo "== $tag"
    grep -E "gpu__time_duration.sum|sm__inst_executed_pipe_[a-z_]*.avg.pct_of_peak_sustained_active|sm__pipe_[a-z_]*cycles_active.avg.pct_of_peak_sustained_active|smsp__issue_active.avg.pct|smsp__average_warp_latency_issue_stalled_[a-z_]*.ratio|smsp__inst_executed.sum |sm__inst_executed_pipe_xu.sum " "$OUT/ncu_$tag.txt" \
        | awk '{v=$NF; if ($0 ~ /stalled/ && v+0 < 0.05) next; print $1, $(NF-1), v}' | head -80
done
