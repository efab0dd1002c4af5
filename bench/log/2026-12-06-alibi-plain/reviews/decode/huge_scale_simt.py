"""decode_simt.cu:72: r_q = q * scale_log2 before the dot product. test_huge_scale_small_scores_on_the_cpu's
case (q = 10, k ~ 1e-30, scale 1e38: scores ~4e9, finite in float64 and SDPA) on the fp32 KV-cache path."""
import numpy as np, warnings; warnings.filterwarnings("ignore")
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
