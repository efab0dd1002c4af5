"""Float32 emulation of decode_attend.cuh's ALiBi distance (lines 340, 427-433):
   rd_a = (float)(L - Nq + ia - 2t); kf = (float)key0; dist = |rd_a - kf - (float)(8n + e%2)|
against the exact |i + delta - j|, for caches past 2^24 keys; then the effect on one row's
softmax (slope 0.5 nats, scores otherwise 0, v = random) vs a float64 reference and a float32
PyTorch-like reference (exact integer distances, as tests/test_variants.py pytorch_like).
MODE=fixed (environment): the fixed kernel, rd = L - Nq + ia - 2t and rd - key0 in int, converted to
float once per row and block, then the exact small offset 8n + e%2 subtracted in float."""
import os
import numpy as np
FIXED = os.environ.get("MODE", "review") == "fixed"
f32 = np.float32
LOG2E = f32(1.4426950408889634)

def kernel_dist(L, Nq, ia, key):
    # key = key0 + 8n + 2t + e%2 with key0 % 16 == block start (relative to k0, here k0 multiple of 16)
    key0 = key - key % 16
    w = key % 16
    n, t, e = w // 8, (w % 8) // 2, w % 2
    if FIXED:
        da = f32(L - Nq + ia - 2 * t - key0)   # one int -> float per row and block
        return abs(f32(da - f32(8 * n + e)))
    rd = f32(L - Nq + ia - 2 * t)          # int -> float: rounds past 2^24
    kf = f32(key0)
    return abs(f32(f32(rd - kf) - f32(8 * n + e)))

for L in (1 << 24, (1 << 24) + 3, (1 << 25) + 5, 100_000_003, 2_000_000_001):
    Nq, ia = 1, 0
    keys = np.arange(L - 64, L)
    true = (L - Nq + ia) - keys
    kd = np.array([kernel_dist(L, Nq, ia, int(j)) for j in keys], dtype=np.float64)
    err = np.abs(kd - true)
    print(f"L={L}: max |dist error| over the last 64 keys = {err.max():.0f}; "
          f"true 0..5 -> kernel {kd[-6:][::-1].astype(int).tolist()}")

# Effect on the output: one query, last 64 keys visible (window (63, 0)), slope 0.5.
rng = np.random.default_rng(0)
L = (1 << 25) + 5
keys = np.arange(L - 64, L)
true = ((L - 1) - keys).astype(np.float64)
kd = np.array([kernel_dist(L, 1, 0, int(j)) for j in keys], dtype=np.float64)
v = rng.standard_normal(64)
slope = 0.5
def out(d):
    s = -slope * d
    p = np.exp(s - s.max()); return (p @ v) / p.sum(), np.log(p.sum()) + s.max()
o_ref, lse_ref = out(true)
# kernel arithmetic: slope2 = slope*log2e (f32), s2 = -slope2*dist (f32), P = exp2(s2 - m)
slope2 = f32(f32(slope) * LOG2E)
s2 = np.array([-f32(slope2 * f32(x)) for x in kd], dtype=np.float32)
m = s2.max(); P = np.exp2((s2 - m).astype(np.float32)).astype(np.float32)
o_k = float((P.astype(np.float64) @ v) / P.astype(np.float64).sum())
lse_k = float((m + np.log2(P.sum(dtype=np.float32))) * 0.6931471805599453)
# PyTorch-like (float32, exact integer distance)
s32 = (-f32(slope) * true.astype(np.float32)).astype(np.float32)
p32 = np.exp(s32 - s32.max()).astype(np.float32)
o_pt = float((p32 @ v.astype(np.float32)) / p32.sum())
print(f"L={L}, slope 0.5, window (63,0): ref out {o_ref:+.6f} lse {lse_ref:+.6f}")
print(f"  kernel-emulated out {o_k:+.6f} (err {abs(o_k-o_ref):.3e}), lse {lse_k:+.6f} (err {abs(lse_k-lse_ref):.3e})")
print(f"  PyTorch-like fp32 out err {abs(o_pt-o_ref):.3e}; rule bound ~ 2*that + slack(bf16 ~1e-2?)")
