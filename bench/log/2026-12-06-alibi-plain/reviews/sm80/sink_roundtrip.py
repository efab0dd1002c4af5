# the lse of a row that sees nothing with a sink: fl(fl(fl(sink*LOG2E) + log2f(1)) * LN2) against sink (exact)
import numpy as np
f32 = np.float32; LOG2E = f32(1.4426950408889634); LN2 = f32(0.69314718055994531)
rng = np.random.default_rng(1)
for mag in [10, 100, 1e3, 1e4, 1e5, 1e6]:
    s = (rng.uniform(0.5, 1, 200000) * mag * rng.choice([-1, 1], 200000)).astype(np.float32)
    back = ((s * LOG2E).astype(np.float32) * LN2).astype(np.float32)
    err = np.abs(back.astype(np.float64) - s)
    print(f"|sink| ~ {mag:g}: rows with lse != sink {np.mean(err > 0):.1%}, max err {err.max():.3g}, > 1e-4: {np.mean(err > 1e-4):.1%}, > 1e-5 (the test's atol): {np.mean(err > 1e-5):.1%}")
