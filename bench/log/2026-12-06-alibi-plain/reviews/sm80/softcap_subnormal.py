# var_rows: y.cap_in = scale / softcap (float32, on the device, IEEE division: subnormal results kept,
# or 0); var_scores: s = tanh.approx(r_s * cap_in) * (softcap * log2e). Where |scale| / softcap is
# below FLT_MIN (1.18e-38), cap_in keeps only log2(cap_in / 2^-149) bits: the effective scale is off.
# Contract: softcap in [1.18e-38, 2.3e38], |scale| / softcap <= 2.3e38 (no lower bound).
import numpy as np, sys
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from var_emu import kernel_var_row, like_row
f32 = np.float32
rng = np.random.default_rng(0)
d, Nk = 64, 256
for scale, softcap, qmul in [(0.125, 30.0, 1.0), (1e-6, 1e37, 1.25e3), (1e-6, 1e38, 1.25e3), (1e-9, 1e36, 4e4), (1e-10, 1e37, 1.25e5)]:
    q = (rng.standard_normal(d) * qmul).astype(np.float32)       # bf16-representable range (emulated as fp32)
    K = (rng.standard_normal((Nk, d)) * qmul).astype(np.float32)
    V = rng.standard_normal((Nk, d)).astype(np.float32)
    S = (K.astype(np.float64) @ q.astype(np.float64)).astype(np.float32)
    cap_in = f32(f32(scale) / f32(softcap))
    vis = np.ones(Nk, bool)
    ok, lk = kernel_var_row(S, vis, V, scale, cap=softcap)        # tanh taken exactly (tanh.approx's own error left out)
    orf, lr = like_row(S, vis, V, scale, cap=softcap, compute=np.float64, pdt=None)
    op, lp = like_row(S, vis, V, scale, cap=softcap)
    print(f"scale {scale:g} softcap {softcap:g}: cap_in {cap_in:.4g} (exact {scale/softcap:.4g}, rel err {abs(float(cap_in)/(scale/softcap)-1):.1e}); "
          f"scores up to {np.abs(S).max()*scale:.3g}; out err {np.abs(ok-orf).max():.3g} (PyTorch-like {np.abs(op-orf).max():.3g}); lse {lk:.6g} vs {lr:.6g}")
