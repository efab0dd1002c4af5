import numpy as np, math, sys
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from var_emu import *
rng = np.random.default_rng(0)
d = 64
def rule(name, rows):
    """rows: list of (kernel_lse, pt_lse, ref_lse) per row; the test's assert_lse over all finite rows."""
    k = np.array([r[0] for r in rows], np.float64); p = np.array([r[1] for r in rows], np.float64)
    r = np.array([r[2] for r in rows], np.float64)
    fin = np.isfinite(r)
    err = np.abs(k[fin] - r[fin]).max(); err_pt = np.abs(p[fin] - r[fin]).max()
    bound = 2 * err_pt + 1e-4
    print(f"{name}: lse err {err:.3e}, PyTorch-like {err_pt:.3e}, bound {bound:.3e} -> {'PASS' if err <= bound else 'FAIL'}")

# A. rows that see nothing, with a sink (key_mask all 0): lse must be the sink
for sink in [4.0, 100.0, 1000.0, 1e4, -3e4, 123456.7]:
    rows = []
    for h in range(4):
        sk = float(np.float32(sink * (1 + 0.01 * h)))
        s_raw = rng.standard_normal(40).astype(np.float32)
        vis = np.zeros(40, bool)
        V = rng.standard_normal((40, d)).astype(np.float32)
        _, lk = kernel_var_row(s_raw, vis, V, 0.125, sink=sk)
        _, lp = like_row(s_raw, vis, V, 0.125, sink=sk)
        _, lr = like_row(s_raw, vis, V, 0.125, sink=sk, compute=np.float64, pdt=None)
        rows.append((lk, lp, lr))
    rule(f"A empty rows, sinks ~{sink:g}", rows)
