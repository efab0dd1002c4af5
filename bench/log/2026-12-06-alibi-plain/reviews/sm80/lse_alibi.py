import numpy as np, math, sys
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from var_emu import *
d = 64
def run(name, Nq, Nk, slope, sigma=1.0, align="bottom_right", causal=False, sink=None, seed=0, rows_only=None):
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((Nq, d)) * sigma).astype(np.float16).astype(np.float32)
    K = rng.standard_normal((Nk, d)).astype(np.float16).astype(np.float32)
    V = rng.standard_normal((Nk, d)).astype(np.float16).astype(np.float32)
    S = (q.astype(np.float64) @ K.T.astype(np.float64)).astype(np.float32)   # fp32 q.k (both sides use it)
    delta = Nk - Nq if align == "bottom_right" else 0
    ek = ep = eok = eop = 0.0
    for i in (rows_only if rows_only is not None else range(Nq)):
        vis = np.ones(Nk, bool)
        if causal: vis &= np.arange(Nk) <= i + delta
        ok, lk = kernel_var_row(S[i], vis, V, 0.125, slope=slope, rowd=i + delta, sink=sink)
        op, lp = like_row(S[i], vis, V, 0.125, slope=slope, rowd=i + delta, sink=sink)
        orf, lr = like_row(S[i], vis, V, 0.125, slope=slope, rowd=i + delta, sink=sink, compute=np.float64, pdt=None)
        ek = max(ek, abs(float(lk) - lr)); ep = max(ep, abs(float(lp) - lr))
        eok = max(eok, np.abs(ok.astype(np.float16).astype(np.float64) - orf).max()); eop = max(eop, np.abs(op.astype(np.float16).astype(np.float64) - orf).max())
    print(f"{name}: lse err {ek:.3e} vs bound {2*ep+1e-4:.3e} ({'PASS' if ek <= 2*ep+1e-4 else 'FAIL'}); "
          f"out err {eok:.3e} vs bound {2*eop+1e-5:.3e} ({'PASS' if eok <= 2*eop+1e-5 else 'FAIL'})")
for slope in [-0.05, -0.5, -2.0, -8.0, -30.0]:
    for Nq, Nk in [(4, 1024), (4, 4096), (64, 4096)]:
        run(f"neg slope {slope}, Nq {Nq}, Nk {Nk}, bottom-right", Nq, Nk, slope)
for slope in [0.5, 8.0, 1e3, 1e30]:
    run(f"pos slope {slope}, Nq 200, Nk 64 top-left (rows past the keys)", 200, 64, slope, align="top_left", rows_only=range(100, 200, 7))
for sigma in [10.0, 100.0]:
    run(f"logits x{sigma**2:g} with a sink 0 (VAR), 64 x 512", 64, 512, 0.0, sigma=sigma, sink=0.0)
