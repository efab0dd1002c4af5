"""decode_simt.cu:72: r_q = q * scale_log2 before the dot product. test_huge_scale_small_scores_on_the_cpu's
case (q = 10, k ~ 1e-30, scale 1e38: scores ~4e9, finite in float64 and SDPA) on the fp32 KV-cache path.
MODE=fixed (environment): the fixed kernel, q times q_mul = c where |c| <= 1 (else 1) and the reduced
score times s_mul = c where |c| > 1 (else 1), c = scale * log2 e (softmax.cuh fa_q_multiplier), with the
fixed row end (l == 0 rather than l > 0); also at the default scale 1/sqrt(d), where it must be bitwise
the old arithmetic."""
import os
import numpy as np, warnings; warnings.filterwarnings("ignore")
FIXED = os.environ.get("MODE", "review") == "fixed"
f32 = np.float32
rng = np.random.default_rng(0)
d, Nk = 4, 5
q = np.full(d, 10, np.float32); k = (rng.standard_normal((Nk, d)) * 1e-30).astype(np.float32)
v = rng.standard_normal((Nk, d)).astype(np.float32)
c = f32(f32(1e38) * f32(1.4426950408889634))
r_q = (q * c).astype(np.float32)                                   # line 72
print("r_q =", r_q)
s = np.array([np.sum((r_q * kk).astype(np.float32), dtype=np.float32) for kk in k], np.float32)
print("kernel scores (log2 units):", s)
m = np.fmax.reduce(s); p = np.exp2(s - m); l = p.sum()
print("kernel l =", l, "-> out", (p @ v / l) if l > 0 else np.zeros(d), "(l NaN reads as no key: 0, lse -inf)")
S = (q.astype(np.float64) @ k.T.astype(np.float64)) * 1e38
P = np.exp(S - S.max()); print("float64 scores:", S, "\nfloat64 out:", P @ v / P.sum())
# fixed order: s = (q.k) * c
s2 = np.array([f32(np.sum((q * kk).astype(np.float32), dtype=np.float32) * c) for kk in k], np.float32)
p2 = np.exp2(s2 - s2.max()); print("scaled after the dot product:", p2 @ v / p2.sum())

if FIXED:
    def kernel(q, k, v, scale):
        c = f32(f32(scale) * f32(1.4426950408889634))
        q_mul, s_mul = (c, f32(1)) if abs(c) <= 1 else (f32(1), c)
        r_q = (q * q_mul).astype(np.float32)
        s = np.array([f32(np.sum((r_q * kk).astype(np.float32), dtype=np.float32) * s_mul) for kk in k], np.float32)
        m = np.fmax.reduce(s); p = np.exp2((s - m).astype(np.float32)).astype(np.float32); l = p.sum(dtype=np.float32)
        out = np.zeros_like(q) if l == 0 else (p @ v / l).astype(np.float32)
        lse = -np.inf if l == 0 else (m + np.log2(l)) * 0.6931472
        return out, lse, p[np.argmax(s)]
    def float64(q, k, v, scale):
        S = (q.astype(np.float64) @ k.T.astype(np.float64)) * scale
        P = np.exp(S - S.max()); return P @ v / P.sum(), S.max() + np.log(P.sum())
    for name, qq, kk, sc in [("q = 10, k ~ 1e-30, scale 1e38", q, k, 1e38),
                             ("q = 10, k ~ 1e-30, scale -1e38", q, k, -1e38),
                             ("randn, scale 1/sqrt(d)", rng.standard_normal(d).astype(np.float32),
                              rng.standard_normal((Nk, d)).astype(np.float32), d ** -0.5)]:
        o, lse, pmax = kernel(qq, kk, v, sc); o64, lse64 = float64(qq, kk, v, sc)
        print(f"fixed, {name}: out {o}, lse {lse:.9g}; P of the max key {pmax}")
        print(f"  float64 out {o64}, lse {lse64:.9g}; max |out err| {np.abs(o - o64).max():.2e}, "
              f"|lse err| / |lse| {abs(lse - lse64) / abs(lse64):.2e}")
    # Default scale: |c| <= 1, so q_mul = c and s_mul = 1: the old arithmetic bit for bit.
    qq, kk = rng.standard_normal(d).astype(np.float32), rng.standard_normal((Nk, d)).astype(np.float32)
    c = f32(f32(d ** -0.5) * f32(1.4426950408889634))
    old = np.array([np.sum(((qq * c).astype(np.float32) * x).astype(np.float32), dtype=np.float32) for x in kk])
    new = np.array([f32(np.sum(((qq * c).astype(np.float32) * x).astype(np.float32), dtype=np.float32) * f32(1))
                    for x in kk])
    print("default scale, scores bitwise equal to the old arithmetic:", np.array_equal(old.view(np.int32), new.view(np.int32)))
