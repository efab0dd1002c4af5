#!/usr/bin/env bash
# run.sh — builds tools/fp32/selftest for the H200 (sm_90a) and runs, in one go:
#   1. the checks and timings of csrc/cuda/fp32.cu, fp32tc.cu and naive.cu (simt timed
#      for reference),
#   2. the same with FA_FP32_D64_MIN_CTAS=1 (d=64: one unrolled 255-register CTA per SM instead
#      of two 128-register ones), to pick the d=64 tile from a measurement,
#   3. fp32tc.cu's tile variants (d=128 BN=64 with one stage; Q split per key block; Q split
#      once with two K/V stages) and fp32.cu's d=128 tile variants,
#   4. compute-sanitizer memcheck and racecheck on the small cases,
#   5. SDPA's efficient backend on fp32, same shapes, for the ratio (if torch is importable).
# Logs go to $OUT (default tools/fp32/out). From the repository root:
#     bash tools/fp32/run.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-tools/fp32/out}
mkdir -p "$OUT"
# PREBUILT=dir: the binaries were built there already (same sources, e.g. on a machine without a
# GPU with BUILD_ONLY=1); FAST=1: fp32tc variants only, no sanitizer.
BIN=${PREBUILT:-$(mktemp -d)}
NVCC=(nvcc -std=c++17 -O3 -DNDEBUG -lineinfo -gencode arch=compute_90a,code=sm_90a -Xptxas -v -Icsrc -DFA_WITH_CUDA)
# The kernel files, and what they need beside themselves (status strings and the recorded CUDA
# error, device info, the planner: whichever exist).
SOURCES=(csrc/cuda/fp32.cu csrc/cuda/fp32tc.cu csrc/cuda/naive.cu)
for src in csrc/fa_common.c csrc/cuda/device.c csrc/cuda/plan.c; do [ -f "$src" ] && SOURCES+=("$src"); done

build() {   # build NAME EXTRA_FLAGS...
    local name=$1; shift
    [ -n "${PREBUILT:-}" ] && [ -x "$BIN/$name" ] && [ -z "${BUILD_ONLY:-}" ] && return
    local simt=(-DWITH_SIMT csrc/cuda/simt.cu)
    [ -n "${FAST:-}" ] && simt=()
    "${NVCC[@]}" "$@" "${simt[@]}" tools/fp32/selftest.cu "${SOURCES[@]}" \
        -o "$BIN/$name" > "$OUT/build_$name.log" 2>&1 ||
    "${NVCC[@]}" "$@" tools/fp32/selftest.cu "${SOURCES[@]}" \
        -o "$BIN/$name" > "$OUT/build_$name.log" 2>&1   # without the simt reference
}
( time build selftest ) 2> "$OUT/build_time.log" &
if [ -z "${FAST:-}" ]; then
build selftest_d64c1 -DFA_FP32_D64_MIN_CTAS=1 &
build selftest_d128t64 -DFA_FP32_D128_BM=64 -DFA_FP32_D128_BN=32 -DFA_FP32_D128_MIN_CTAS=2 &
build selftest_d128t128 -DFA_FP32_D128_BM=128 -DFA_FP32_D128_BN=64 -DFA_FP32_D128_MIN_CTAS=1 &
build selftest_tc128b64 -DFA_FP32TC_D128_BN=64 -DFA_FP32TC_D128_STAGES=1 &
fi
# fp32tc: the production tiles split Q once into shared memory (QS); tcqs0 splits it per key block
# with two K/V stages at d=128, tcqs2 keeps QS with two stages (one CTA per SM at d=128)
build selftest_tcqs0 -DFA_FP32TC_D128_QS=0 -DFA_FP32TC_D64_QS=0 -DFA_FP32TC_D128_STAGES=2 &
build selftest_tcqs2 -DFA_FP32TC_D128_STAGES=2 &
wait
[ -n "${BUILD_ONLY:-}" ] && { ls -la "$BIN"; exit 0; }
cat "$OUT/build_time.log"
grep -A2 "fp32_[a-z_]*kernel" "$OUT/build_selftest.log" | grep -E "entry|spill|registers"
grep -E "spill|error" "$OUT/build_selftest_d64c1.log" | head -10
echo "fp32tc (d=64, d=128), then its d=128 BN=64 variant:"
grep -A2 "fa_fp32tc_[a-z_]*kernel" "$OUT/build_selftest.log" | grep -E "entry|spill|registers"
grep -A2 "fa_fp32tc_[a-z_]*kernel.*ILi128" "$OUT/build_selftest_tc128b64.log" | grep -E "entry|spill|registers"
[ -x "$BIN/selftest" ] || { echo "build failed"; cat "$OUT/build_selftest.log"; exit 1; }

echo "== fp32 + fp32tc + naive: checks and timings"
"$BIN/selftest" 2>&1 | tee "$OUT/selftest.log"
status=${PIPESTATUS[0]}

echo "== d=64 with one 255-register CTA per SM"
[ -x "$BIN/selftest_d64c1" ] && "$BIN/selftest_d64c1" --check --bench --d64 --no-baselines 2>&1 |
    grep -E "FAIL|passed|^fp32 |^kernel" | tee "$OUT/selftest_d64c1.log"

for v in $([ -z "${FAST:-}" ] && echo d128t64 d128t128); do
    echo "== d=128 tile variant $v"
    [ -x "$BIN/selftest_$v" ] && "$BIN/selftest_$v" --check --bench --d128 --no-baselines 2>&1 |
        grep -E "FAIL|passed|^fp32 |^kernel" | tee "$OUT/selftest_$v.log"
done

for v in $([ -z "${FAST:-}" ] && echo tc128b64) tcqs0 tcqs2; do
    echo "== fp32tc variant $v (see the build lines above)"
    [ -x "$BIN/selftest_$v" ] && "$BIN/selftest_$v" --check --bench --no-baselines 2>&1 |
        grep -E "FAIL|passed|^fp32tc +[0-9]|^kernel" | tee "$OUT/selftest_$v.log"
done

echo "== compute-sanitizer (small cases)"
if [ -z "${FAST:-}" ] && command -v compute-sanitizer > /dev/null; then
    timeout 300 compute-sanitizer --tool memcheck "$BIN/selftest" --check --small 2>&1 | tail -4 | tee "$OUT/memcheck.log"
    timeout 300 compute-sanitizer --tool racecheck "$BIN/selftest" --check --small 2>&1 | tail -4 | tee "$OUT/racecheck.log"
fi

echo "== SDPA efficient backend, fp32"
timeout 300 python3 - <<'PY' 2>&1 | tee "$OUT/sdpa_efficient.log"
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

def median_ms(fn, reps=15):
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0.record(); fn(); t1.record(); t1.synchronize()
        times.append(t0.elapsed_time(t1))
    return sorted(times)[reps // 2]

print(f"{'kernel':7s} {'d':>4s} {'N':>6s} {'B':>3s} {'H':>3s} {'causal':>6s}  {'ms':>10s} {'TFLOP/s':>9s}")
for d in (64, 128):
    for n in (1024, 4096, 16384):
        b, h = 16384 // n, 2048 // d
        q, k, v = (torch.randn(b, h, n, d, device="cuda") for _ in range(3))
        for causal in (0, 1):
            with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
                ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal)))
            flop = 4 * b * h * n * n * d * (0.5 if causal else 1.0)
            print(f"{'sdpa-ef':7s} {d:4d} {n:6d} {b:3d} {h:3d} {causal:6d}  {ms:10.3f} {flop / ms * 1e-9:9.2f}", flush=True)
PY
[ -z "${PREBUILT:-}" ] && rm -rf "$BIN"
exit $status
