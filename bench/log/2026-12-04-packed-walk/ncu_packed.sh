#!/usr/bin/env bash
# Nsight Compute (--set full) on one d = 128, 4 × 4096, non-causal bf16 call in three forms (overhead.py):
# the dense kernel, the same with an all-true key_mask, and the four sequences packed. Text reports
# under $OUT/ncu_<form>.txt; key lines printed.
set -uo pipefail
cd "$(dirname "$0")/../../.."
source tools/ncu_env.sh
for form in dense key_mask packed; do
    timeout 150 "$NCU" --kernel-name regex:fa_sm90_forward_kernel --launch-skip 2 --launch-count 1 --set full \
        python3 -c "
import torch, torch_flashattn
B, N, H, d = 4, 4096, 16, 128
q, k, v = (torch.randn(B * N, H, d, dtype=torch.bfloat16, device='cuda') for _ in range(3))
qb, kb, vb = (x.view(B, N, H, d).transpose(1, 2) for x in (q, k, v))
cu = torch.arange(0, B * N + 1, N, dtype=torch.int32, device='cuda')
km = torch.ones(B, N, dtype=torch.bool, device='cuda')
f = {'dense': lambda: torch_flashattn.attention(qb, kb, vb),
     'key_mask': lambda: torch_flashattn.attention(qb, kb, vb, key_mask=km),
     'packed': lambda: torch_flashattn.attention_varlen(q, k, v, cu, cu, N, N)}['$form']
for _ in range(3): f()
torch.cuda.synchronize()" > "$OUT/ncu_$form.txt" 2>&1
    echo "== $form"; grep -E "fa_sm90_forward_kernel<|Duration|Compute \(SM\) Throughput|Registers Per|Issue Slots Busy|Executed Ipc A|No Eligible|Warp Cycles Per Issued|Grid Size|Waves Per SM|L2 Hit|DRAM Throughput|One or More|Active Warps" "$OUT/ncu_$form.txt" | head -20
done
