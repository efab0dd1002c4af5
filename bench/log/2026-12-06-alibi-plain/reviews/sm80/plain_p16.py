# sm80 plain kernel (VAR=false), fp16: P_max = ex2(fma(m, c, -fl(m*c))) = 2^res, res = m*c - fl(m*c);
# P is packed to fp16 (pack2<__half>) for the P V mma: 2^res >= 65520 -> inf.
import numpy as np
f32 = np.float32
LOG2E = f32(1.4426950408889634)
def res_of(m, scale):
    c = max(f32(abs(f32(scale)) * LOG2E), f32(np.finfo(np.float32).tiny))
    mc = f32(m) * c                              # float32 product, round to nearest
    exact = np.longdouble(f32(m)) * np.longdouble(c)   # exact (48-bit) product
    return float(exact - np.longdouble(mc)), float(exact)
# the concrete case: d = 64, q = k = 2.5 everywhere (fp16 exact), scale = 1e6 -> raw q.k = 400
for qv, scale in [(2.5, 1e6), (2.5, 1.5e6), (3.0, 1e6), (1.0, 2e7)]:
    m = f32(64 * qv * qv)
    r, e = res_of(m, scale)
    P = np.float32(2.0 ** r)
    print(f"q=k={qv} d=64 scale={scale:g}: raw max {m}, m*c = {e:.6g} (2^{np.log2(e):.2f}), residue {r:+.3f}, "
          f"P_max = 2^res = {P:.4g}, as fp16: {np.float16(P)}, ftz'd to 0: {r < -126}")
# fraction of rows with non-finite fp16 P_max, over random maxima in each binade
rng = np.random.default_rng(0)
scale = 0.125
for e2 in range(26, 34):
    ms = (2.0 ** e2 * (1 + rng.random(4000)) / float(scale * 1.4426950408889634)).astype(np.float32)
    bad16 = badl = 0
    for m in ms:
        r, _ = res_of(m, scale)
        bad16 += np.isinf(np.float16(np.float32(2.0 ** r))) if r < 200 else 1
        badl += (r >= 128) or (r < -126)
    print(f"m*c in [2^{e2}, 2^{e2+1}) (natural scores {2**e2/1.4427:.2g}..): fp16 P_max inf in {bad16/len(ms):.1%} of rows; "
          f"fp32 P_max inf or 0 in {badl/len(ms):.1%}")
