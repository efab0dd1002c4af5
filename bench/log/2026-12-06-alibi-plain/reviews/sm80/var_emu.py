# float32 emulation of the sm80 VAR kernel's per-row arithmetic (sm80.cu lines 322-398, 437-451,
# variants.cuh var_scores with MODS = FA_MODS_ALL, y.raw = false, c = 1; fa_row_end), beside
# pytorch_like (tests/test_variants.py: fp32 scores and softmax) and a float64 reference.
import numpy as np, math
f32 = np.float32
LOG2E = f32(1.4426950408889634); LN2 = f32(0.69314718055994531)
LD = np.longdouble
import os
LSE_MODE = os.environ.get('LSE_MODE', 'main')
def fma32(a, b, c):  # a*b exact in long double (64-bit mantissa), one final rounding (double rounding negligible)
    return (LD(a) * LD(b) + LD(c)).astype(np.float32) if isinstance(a, np.ndarray) or isinstance(c, np.ndarray) \
        else f32(LD(a) * LD(b) + LD(c))
def ex2(x):
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore"):
        y = np.exp2(x).astype(np.float32)
    return np.where(y < np.finfo(np.float32).tiny, f32(0), y)
def exp2f(x): return f32(np.exp2(np.float64(x)))
def log2f(x): return f32(np.log2(np.float64(x))) if x > 0 else f32(-np.inf)

def kernel_var_row(s_raw, vis, V, scale, slope=0.0, rowd=0, sink=None, cap=None, BN=64, pdt=np.float16):
    """s_raw: fp32 raw q.k for keys 0..Nk-1; vis: visibility (bool); returns out (fp32), lse (fp32)."""
    Nk = len(s_raw)
    scale = f32(abs(scale))
    if cap is not None:
        cap_in = f32(scale / f32(cap)); yc = f32(f32(cap) * LOG2E)
        s = np.tanh(np.float64((s_raw * cap_in).astype(np.float32))).astype(np.float32)
    else:
        yc = f32(scale * LOG2E); s = s_raw.astype(np.float32)
    s = (s * yc).astype(np.float32)
    if slope != 0.0:
        slope2 = f32(f32(slope) * LOG2E)
        j = np.arange(Nk)
        dist = np.abs(np.float32(rowd) - j.astype(np.float32)).astype(np.float32)  # exact below 2^24
        if os.environ.get("SLOPE_SPLIT"):
            # slope * log2e as hi + lo (lo from the exact product), two fmas per score
            hi = slope2
            lo = f32(LD(f32(slope)) * (LD(LOG2E) if os.environ.get("SLOPE_SPLIT") == "f" else LD(1.4426950408889634073599246810019)) - LD(hi))
            s = np.array([fma32(-hi, dd, fma32(-lo, dd, ss)) for dd, ss in zip(dist, s)], np.float32)
        else:
            s = np.array([fma32(-slope2, dd, ss) for dd, ss in zip(dist, s)], np.float32)
    s = np.where(vis, s, f32(-np.inf)).astype(np.float32)
    m = f32(-np.inf); l = f32(0); O = np.zeros(V.shape[1], np.float32)
    for k0 in range(0, Nk, BN):
        blk = s[k0:k0 + BN]
        m_new = max(m, blk.max())
        alpha = f32(1) if m_new == -np.inf else ex2(f32(m - m_new)) if m != m_new else f32(1)
        l = f32(l * alpha); O = (O * alpha).astype(np.float32)
        mc = f32(0) if m_new == -np.inf else m_new
        P = ex2((blk - mc).astype(np.float32))
        l = f32(l + P.sum(dtype=np.float32))
        O = (O + (P.astype(pdt).astype(np.float32)[:, None] * V[k0:k0 + BN]).sum(0, dtype=np.float32)).astype(np.float32)
        m = m_new
    # fa_row_end
    none = l == 0
    if sink is not None:
        s2 = f32(f32(sink) * LOG2E)
        M = m if (not none and m > s2) else s2
        lt = f32((f32(0) if none else f32(l * exp2f(f32(m - M)))) + (f32(0) if s2 == -np.inf else exp2f(f32(s2 - M))))
        o_mul = f32(0) if none else f32(exp2f(f32(m - M)) / lt)
        lse2 = f32(M + log2f(lt))
    else:
        o_mul = f32(0) if none else f32(1 / l)
        lse2 = f32(-np.inf) if none else f32(m + log2f(l))
    if LSE_MODE == "inv" and np.isfinite(lse2):
        # fix: M / LOG2E_f as a double-float constant, log2 l * LN2, one final rounding
        Mx = (m if sink is None else M); lg = log2f(l) if sink is None else log2f(lt)
        inv = LD(1) / LD(LOG2E); ih = f32(inv); il = f32(inv - LD(ih))
        return (O * o_mul).astype(np.float32), fma32(Mx, ih, fma32(Mx, il, f32(lg * LN2)))
    if LSE_MODE == "fma" and np.isfinite(lse2):
        # fix: lse = fmaf(M, LN2, log2f(lt) * LN2): one rounding of the sum in natural units
        Mx = (m if sink is None else M)
        lg = log2f(l) if sink is None else log2f(lt)
        return (O * o_mul).astype(np.float32), fma32(Mx, LN2, f32(lg * LN2))
    return (O * o_mul).astype(np.float32), f32(lse2 * LN2)

def like_row(s_raw, vis, V, scale, slope=0.0, rowd=0, sink=None, cap=None, compute=np.float32, pdt=np.float16):
    """pytorch_like (compute = float32, P rounded to pdt) or the reference (float64, pdt None)."""
    c = compute
    s = (s_raw.astype(c) * c(scale)).astype(c)
    if cap is not None:
        s = (c(cap) * np.tanh((s / c(cap)).astype(c)).astype(c)).astype(c)
    if slope != 0.0:
        rel = np.abs(rowd - np.arange(len(s_raw))).astype(c)
        s = (s - (c(slope) * rel).astype(c)).astype(c)
    s = np.where(vis, s, -np.inf).astype(c)
    m = s.max()
    if sink is not None: m = max(m, c(sink))
    mm = m if np.isfinite(m) else c(0)
    p = np.exp((s - mm).astype(c)).astype(c)
    den = p.sum(dtype=c)
    if sink is not None: den = c(den + c(np.exp(c(c(sink) - mm))))
    pp = p.astype(pdt).astype(c) if pdt is not None else p
    if den == 0:
        return np.zeros(V.shape[1]), -np.inf
    return ((pp[:, None] * V.astype(c)).sum(0, dtype=c) / den).astype(c), c(c(np.log(den)) + mm)
