#!/usr/bin/env bash
# Nsight Compute on the sm_80 kernel (FA_KERNEL=sm80) and SDPA's flash backend (FlashAttention-2) on
# the same call, side by side: where the sm_80 kernel loses to FlashAttention-2 at d = 256 (0.84-0.98×
# on the H200). Per kernel: speed of light, instruction mix, warp stalls, shared-memory bank
# conflicts (details pages under $OUT), then tools/sm90/ncu_source.py's per-instruction summary.
# NCU_SHAPE="B H N d causal" (default 4 8 4096 256 0, bf16). NCU_PASS=backward: the sm_80 backward's
# main kernel against FlashAttention-2's (flash_bwd_dq_dk_dv_loop_seqk_parallel), under
# torch.autograd.grad. Files: $OUT/ncu_sm80_{fa,sdpa}_PASS_dD_nN_cC*.
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/ncu_env.sh
set -- ${NCU_SHAPE:-4 8 4096 256 0}
pass=${NCU_PASS:-forward}
shape="B=$1 H=$2 N=$3 d=$4 causal=$5, $pass"
case "$pass" in
forward) ours=fa_sm80_forward_kernel; theirs=flash_fwd ;;
backward) ours=fa_sm80_backward_kernel; theirs=flash_bwd_dq_dk_dv ;;
*) echo "NCU_PASS: forward or backward, not $pass"; exit 2 ;;
esac
tag=${pass}_d$4_n$3_c$5
for who in fa sdpa; do
    if [ $who = fa ]; then regex="regex:$ours"; else regex="regex:$theirs"; fi
    f="$OUT/ncu_sm80_${who}_$tag"
    FA_KERNEL=sm80 timeout 200 "$NCU" --kernel-name "$regex" --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
        --section WarpStateStats --section MemoryWorkloadAnalysis_Tables --section SourceCounters \
        --section LaunchStats --section Occupancy -f -o "$f" python3 -c "
import torch, torch.nn.functional as F, torch_flashattn
from torch.nn.attention import SDPBackend, sdpa_kernel
grad = '$pass' == 'backward'
q, k, v = (torch.randn($1, $2, $3, $4, dtype=torch.bfloat16, device='cuda', requires_grad=grad) for _ in range(3))
for _ in range(3):
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        if '$who' == 'fa':
            o = torch_flashattn.attention(q, k, v, causal=bool($5))
        else:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=bool($5))
    if grad:
        torch.autograd.grad(o, (q, k, v), torch.ones_like(o))
torch.cuda.synchronize()" > "$f.log" 2>&1 || { echo "$who: ncu failed"; tail -5 "$f.log"; continue; }
    "$NCU" -i "$f.ncu-rep" --page details --print-details all > "${f}_details.txt" 2>&1
    "$NCU" -i "$f.ncu-rep" --page source --csv --print-source sass > "${f}_sass.csv" 2>&1
done
echo "== $shape, bf16: FA_KERNEL=sm80 (left) against SDPA flash (right)"
python3 - "$OUT/ncu_sm80_fa_${tag}_details.txt" "$OUT/ncu_sm80_sdpa_${tag}_details.txt" <<'PY'
import re, sys
want = ["Duration", "SM Frequency", "Registers Per Thread", "Block Size", "Grid Size",
        "Dynamic Shared Memory Per Block", "Achieved Occupancy", "Compute (SM) Throughput",
        "Issue Slots Busy", "Executed Ipc Active", "Warp Cycles Per Issued Instruction",
        "Executed Instructions", "Shared Load", "Bank Conflicts", "L1/TEX Hit Rate", "L2 Hit Rate",
        "DRAM Throughput", "Stall"]
def read(path):
    rows = {}
    try:
        text = open(path).read()
    except OSError:
        return rows
    for line in text.splitlines():
        m = re.match(r"\s{4}(\S.*?)\s{2,}(\S+)?\s+([\d.,]+)\s*$", line)
        if m and any(w.lower() in m.group(1).lower() for w in want):
            rows.setdefault(m.group(1).strip(), m.group(3))
    return rows
a, b = read(sys.argv[1]), read(sys.argv[2])
for key in list(dict.fromkeys(list(a) + list(b))):
    print(f"  {key[:60]:60s} {a.get(key, '-'):>14s} {b.get(key, '-'):>14s}")
PY
for who in fa sdpa; do
    echo "== per instruction: $who"
    python3 -m tools.sm90.ncu_source "$OUT/ncu_sm80_${who}_${tag}_sass.csv" | sed -n '/by opcode/,/top instructions/p' | head -22
done
