# The plain/SINK sm90 softmax: P = ex2.approx.ftz(fmaf(s, c, -fl(m*c))); the max key's own exponent is
# the rounding residual of fl(m*c). Fraction of rows whose P_max flushes to 0 (l = 0 -> fa_row_end's
# "no visible key": O = 0, lse = sink) or overflows to inf (NaN), by the row max (natural units).
import numpy as np
rng=np.random.default_rng(0)
L2E=np.float32(1.4426950408889634)
for d,scale in [(128, 128**-0.5), (64, 1.0)]:
    c=np.float32(np.float32(scale)*L2E)
    for lo in [1e6,1e8,1e9,2e9,5e9,1e10,1e11,1e12]:
        # raw max scores m (fp32 accumulators) with random mantissas near lo/scale
        m=(np.float32(lo/scale)*(1+rng.random(200000)*0.5)).astype(np.float32)
        mc=(m*c).astype(np.float32)                       # FMUL, rounded
        r=m.astype(np.float64)*np.float64(c)-mc.astype(np.float64)   # fmaf residual (exact)
        zero=(r< -126).mean(); inf=(r>=128).mean()
        print(f"d={d} scale={scale:.4g} scores ~{lo:.0e}..{1.5*lo:.0e}: |m*c|~{float(mc[0]):.2e}, "
              f"max|residual| {np.abs(r).max():.3g}; P_max=0 (SINK: O=0, lse=sink) {zero:.1%}, P_max=inf (NaN) {inf:.1%}")
