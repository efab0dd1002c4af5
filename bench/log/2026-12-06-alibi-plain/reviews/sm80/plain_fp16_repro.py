# Emulates the sm80 plain kernel (VAR = false) on one row, fp16: q = k rows of 2.5 (d = 64, raw q.k = 400),
# Nk keys, key 0 the row's maximum; out should be v[0] (softmax one-hot at these scores).
# Kernel: c = fl(|scale| log2e); mc = fl(m c); P = ex2.ftz(fma(s, c, -mc)); l = sum P (fp32);
# O = sum fp16(P) * v (fp32 accumulate); out = O / l.
import numpy as np
f32, f16 = np.float32, np.float16
LOG2E = f32(1.4426950408889634)
def fma32(a, b, c):
    return f32(np.longdouble(a) * np.longdouble(b) + np.longdouble(c))
def ex2(x):
    x = float(x)
    if x == -np.inf: return f32(0)
    y = f32(2.0 ** x) if x < 128 else f32(np.inf)
    return f32(0) if 0 < y < np.finfo(np.float32).tiny else y
def kernel_row(s_raw, v, scale):
    c = max(f32(abs(f32(scale)) * LOG2E), np.finfo(np.float32).tiny)
    m = s_raw.max(); mc = f32(m * c)
    P = np.array([ex2(fma32(s, c, -mc)) for s in s_raw], dtype=np.float32)
    l = P.sum(dtype=np.float32)
    with np.errstate(all="ignore"):
        O = (P.astype(np.float16).astype(np.float32)[:, None] * v).sum(0, dtype=np.float32)
        return f32(1) / l * O, float(np.longdouble(m) * np.longdouble(c) - np.longdouble(mc)), P[0]
d = 64
q = np.full(d, 2.5, np.float16).astype(np.float32)
rng = np.random.default_rng(3)
Nk = 8
K = rng.standard_normal((Nk, d)).astype(np.float16).astype(np.float32); K[0] = q
V = rng.standard_normal((Nk, d)).astype(np.float16).astype(np.float32); V[0] = 1.0
s_raw = (K.astype(np.float64) @ q.astype(np.float64)).astype(np.float32)   # exact here (fp16 products)
found = {}
for i in range(4000):
    scale = float(f32(1e6 * (1 + i / 1000)))
    out, res, p0 = kernel_row(s_raw, V, scale)
    kind = "inf/NaN" if not np.isfinite(out).all() else ("zero" if np.all(out == 0) else
            ("scaled" if abs(out[0] - 1) > 1e-3 else "ok"))
    if kind not in found:
        found[kind] = (scale, res, p0, out[:3])
for kind, (scale, res, p0, o) in found.items():
    print(f"{kind:8s} scale={scale:.9g}: max score {400*scale:.4g} (log2 {400*scale*1.4427:.4g}), residue {res:+.3f}, "
          f"P_max fp32 {p0:.4g} -> fp16 {np.float16(p0)}; out[:3] = {o}  (reference: 1.0 1.0 1.0)")
# a fractional residue: q random large fp16, k0 = q
print("-- fractional residues (q random, |q| ~ 30) --")
q = (rng.standard_normal(d) * 30).astype(np.float16).astype(np.float32)
K[0] = q
s_raw = (K.astype(np.float64) @ q.astype(np.float64)).astype(np.float32)
seen = set()
for i in range(3000):
    scale = float(f32(3e4 * (1 + i / 1000)))
    out, res, p0 = kernel_row(s_raw, V, scale)
    kind = "inf/NaN" if not np.isfinite(out).all() else ("zero" if np.all(out == 0) else
            ("scaled" if abs(out[0] - 1) > 1e-3 else "ok"))
    if kind not in seen:
        seen.add(kind)
        print(f"{kind:8s} scale={scale:.9g}: max score {s_raw[0]*scale:.4g}, residue {res:+.3f}, P_max {p0:.4g} -> fp16 {np.float16(p0)}, out[0] = {out[0]:.4g}")
