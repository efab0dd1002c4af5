"""lse of a row dominated by its sink, through the decode kernels' log2 round trip:
s2 = f32(sink * LOG2E); fa_row_end -> lse2 = M + log2(lt); lse = f32(lse2 * LN2)
(decode.cuh decode_sink + store_result; decode_simt.cu:205/213; decode_attend.cuh:99/103).
Against float64 and against tests/test_variants.py's pytorch_like (float32: lse = log(denom) + m, m = sink)."""
import numpy as np
f32 = np.float32
LOG2E, LN2 = f32(1.4426950408889634), f32(0.69314718055994531)
def fa_row_end(m, l, s2):
    none = l == 0
    M = m if (not none and m > s2) else s2
    lt = f32((f32(0) if none else f32(l * np.exp2(f32(m - M)))) + np.exp2(f32(s2 - M)))
    return f32(M + np.log2(lt))
worst = {}
for sink in [30.0, 300.0, 1000.0, 3000.0, 1e4, 1e5]:
    errs = []
    for sk in f32(sink) * (1 + np.linspace(-0.01, 0.01, 2001, dtype=np.float32)):
        sk = f32(sk)
        # one visible key with score 0 (natural), row lse2 = 0 in log2 units, l = 1
        row_lse2 = f32(0)
        lse2 = fa_row_end(row_lse2, f32(1), f32(sk * LOG2E))     # decode_sink(lse2, 1, s2)
        lse = f32(lse2 * LN2)
        ref = np.logaddexp(0.0, float(sk))                       # float64
        pt = f32(np.log(f32(np.exp(f32(0 - sk)) + f32(1))) + sk) # pytorch_like fp32
        errs.append((abs(float(lse) - ref), abs(float(pt) - ref)))
    e = np.array(errs)
    print(f"sink ~{sink:>8g}: kernel lse max err {e[:,0].max():.2e}; PyTorch-like max err {e[:,1].max():.2e}; "
          f"cases past 2*pt+1e-4: {(e[:,0] > 2*e[:,1] + 1e-4).sum()}/{len(e)}")
