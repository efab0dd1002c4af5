# Faithful float32 emulation of the ALiBi plain-tile kernels' arithmetic: sm90_alibi_init, sm90_softmax's
# two-part max (OFF), the row end. MODE picks the one-sided blocks' form (bench/LOG.md
# 2026-12-06-alibi-plain): "hybrid" (default; the next patch: one fma of the full slope where
# |slope| <= 1, else the exact sl * (nb +- k); causal rows take key0 as a negative slope's reference
# in the blocks that straddle them; a fully masked block's exponent offset 0), "fma" (bd87052, run
# on the GPU, withdrawn), "trunc" (the fma on the slope with 8 low bits cleared), "exact"
# (sl * (nb +- k) everywhere, call 1's form). lse in natural units (NATURAL_LSE=1, db9cd60).
import numpy as np, math, sys
f32 = np.float32
LOG2E = f32(1.4426950408889634)
def fmaf(a, b, c): return f32(np.float64(a) * np.float64(b) + np.float64(c))
def ex2(x):
    with np.errstate(over='ignore', invalid='ignore'): return f32(np.exp2(np.float64(x)))

import os
MODE = os.environ.get("MODE", "hybrid")
assert MODE in ("hybrid", "fma", "trunc", "exact"), MODE
NATURAL_LSE = os.environ.get("NATURAL_LSE", "1") == "1"


def alibi_init(BN, key0, row0, t, sl, Nk, causal=False, gentle=True):
    """r_s[BN/2] and near[2] as the CUDA code computes them; gentle: |slope| <= 1 (hybrid's switch)"""
    r_s = np.zeros(BN // 2, np.float32); near = [0.0, 0.0]
    form = MODE if MODE != "hybrid" else ("fma" if gentle else "exact")
    slt = sl
    if form == "trunc":   # the slope with its 8 low mantissa bits cleared: slt * n exact for |n| < 256
        slt = np.array([sl], np.float32).view(np.uint32)[0] & np.uint32(0xFFFFFF00)
        slt = np.array([slt], np.uint32).view(np.float32)[0]
    last = min(key0 + BN, Nk) - 1
    up = sl >= 0
    kk = [f32(8 * (i // 4) + i % 2) for i in range(BN // 2)]
    if last <= row0:
        ref = last if up else key0
        nb = f32(key0 + 2 * t - ref)
        for i in range(BN // 2):
            r_s[i] = f32(sl * f32(nb + kk[i])) if form == "exact" else fmaf(slt, kk[i], f32(slt * nb))
        near = [f32(row0 + 8 * r - ref) for r in range(2)]
    elif key0 >= row0 + 8:
        ref = key0 if up else last
        nb = f32(ref - key0 - 2 * t)
        for i in range(BN // 2):
            r_s[i] = f32(sl * f32(nb - kk[i])) if form == "exact" else fmaf(-slt, kk[i], f32(slt * nb))
        near = [f32(ref - row0 - 8 * r) for r in range(2)]
    else:
        d0 = []; near = [None, None]
        for r in range(2):
            row = row0 + 8 * r
            key0_ref = (causal and MODE == "hybrid") or row - key0 >= last - row
            ref = min(max(row, key0), last) if up else (key0 if key0_ref else last)
            d0.append(f32(row - key0 - 2 * t))
            near[r] = f32(abs(row - ref))
        for i in range(BN // 2):
            rr = (i // 2) % 2
            r_s[i] = f32(-sl * f32(abs(f32(d0[rr] - kk[i])) - near[rr]))
    return r_s, near

def run_row0(q, k, v, row0, slope, scale, causal, BN, kblocks, always_take, row_first=None):
    """rows row0, row0+8 of one warp's quad (4 threads t); kblocks: list of key-block indices in order"""
    Nk, d = k.shape
    c = f32(f32(scale) * LOG2E)
    sl = f32(slope * LOG2E / c) if abs(slope) <= 2.3e38 else f32('nan')
    sl = f32(max(min(sl, f32(2.0**96)), f32(-2.0**96))) if not np.isnan(sl) else sl
    s2 = f32(sl * c)
    true2 = f32(f32(slope) * LOG2E) if not np.isnan(sl) else f32('nan')
    slope_nat = f32(slope) if not np.isnan(sl) else f32('nan')
    m_i = [f32(-np.inf)] * 2; l_i = [[f32(0)] * 2 for _ in range(4)]; near_m = [f32(0)] * 2
    O = np.zeros((2, d)); Lsum = [0.0, 0.0]
    kd = k.astype(np.float64); qd = q.astype(np.float64)
    rf = row0 if row_first is None else row_first
    for kb in kblocks:
        key0 = kb * BN
        S = {}
        for t in range(4):
            r_s, near = alibi_init(BN, key0, row0, t, sl, Nk, causal, abs(s2) <= LOG2E)
            for i in range(BN // 2):
                key = key0 + 8 * (i // 4) + 2 * t + i % 2
                row = row0 + 8 * ((i // 2) % 2)
                acc = r_s[i]
                if key < Nk:
                    for ch in range(d // 16):
                        acc = f32(np.float64(acc) + qd[row, 16*ch:16*ch+16] @ kd[key, 16*ch:16*ch+16])
                else:
                    acc = f32(acc)  # K rows zero-filled
                if key >= Nk or (causal and key > row): acc = f32(-np.inf)
                S[(t, i)] = (acc, key, row)
        mc = [0, 0]; alpha = [0, 0]
        for r in range(2):
            m = f32(-np.inf)
            for t in range(4):
                for i in range(BN // 2):
                    if (i // 2) % 2 == r: m = f32(np.fmax(m, S[(t, i)][0]))
            cand = f32(m * c)
            if m_i[r] == -np.inf: diff = f32(np.inf)
            else: diff = fmaf(-s2, f32(near[r] - near_m[r]), f32(cand - m_i[r]))
            take = True if always_take else not (diff <= 0)
            if take:
                alpha[r] = ex2(-diff)
                for t in range(4): l_i[t][r] = f32(l_i[t][r] * alpha[r])
                m_i[r] = cand; near_m[r] = near[r]
            else:
                alpha[r] = f32(1)
            mc[r] = fmaf(s2, f32(near[r] - near_m[r]), m_i[r])
            if MODE == "hybrid" and m == -np.inf: mc[r] = f32(0)   # a fully masked block: P = 0, whatever the offset
            O[r] *= alpha[r]
        for t in range(4):
            for i in range(BN // 2):
                acc, key, row = S[(t, i)]; r = (i // 2) % 2
                with np.errstate(invalid='ignore'):
                    p = ex2(fmaf(acc, c, -mc[r]))
                l_i[t][r] = f32(l_i[t][r] + p)
                if key < Nk: O[r] += float(p) * v[key].astype(np.float64)
    out = []; lses = []
    for r in range(2):
        l = sum(float(l_i[t][r]) for t in range(4))
        with np.errstate(all='ignore'):
            out.append(O[r] / l)
            if NATURAL_LSE:   # fmaf(-slope, near_m, fa_lse(m_i, l)): one rounding of the distance term
                lses.append(float(fmaf(-slope_nat, near_m[r], f32((float(m_i[r]) + math.log2(l)) * math.log(2)))) if l > 0 else float('nan'))
            else:
                m2 = fmaf(-true2, near_m[r], m_i[r])
                lses.append((float(m2) + math.log2(l)) * math.log(2) if l > 0 else float('nan'))
    return out, lses, (m_i, near_m, l_i)

def ref(q, k, v, rows, slope, scale, causal):
    Nk = k.shape[0]
    s = (q[rows].astype(np.float64) @ k.astype(np.float64).T) * scale
    j = np.arange(Nk)
    s = s - slope * np.abs(np.array(rows)[:, None] - j[None, :])
    if causal: s = np.where(j[None, :] > np.array(rows)[:, None], -np.inf, s)
    m = s.max(1, keepdims=True); p = np.exp(s - m); den = p.sum(1, keepdims=True)
    return (p @ v.astype(np.float64)) / den, (np.log(den) + m)[:, 0]

def case(name, Nq, Nk, d, slope, causal, row0, BN, kblocks=None, row_first=None):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((Nq, d)).astype(np.float32); k = rng.standard_normal((Nk, d)).astype(np.float32); v = rng.standard_normal((Nk, d)).astype(np.float32)
    q = q.astype(np.float16).astype(np.float32); k = k.astype(np.float16).astype(np.float32); v = v.astype(np.float16).astype(np.float32)
    scale = 1 / math.sqrt(d)
    if kblocks is None: kblocks = list(range((Nk + BN - 1) // BN))
    R, RL = ref(q, k, v, [row0, row0 + 8], slope, scale, causal)
    for always in (False,):
        O, L, st = run_row0(q, k, v, row0, slope, scale, causal, BN, kblocks, always, row_first)
        err = max(np.abs(O[r] - R[r]).max() for r in range(2)); lerr = max(abs(L[r] - RL[r]) for r in range(2))
        print(f"{name:44s} {'as-patched (LAZY=0 always takes)' if always else 'take only diff>0       '}: out err {err:.2e}  lse err {lerr:.2e}  m_i {st[0]}", flush=True)

if __name__ == '__main__':
    case("noncausal d128 row0=0 slope .25, 1024 keys", 16, 1024, 32, 0.25, False, 0, 128)
    case("noncausal row0=1400 slope -.5, 1500 keys", 1500, 1500, 32, -0.5, False, 1400, 128)
    case("noncausal slope 0.0039 (paper h=4/4) row0=0", 16, 2048, 32, 2**-8, False, 0, 128)
    # d64 3-consumer causal tile (BM 192, BN 128, ping-pong: all n_blocks): tile m0=0, consumer 0 rows 0..63 see block 1 fully masked
    case("causal BM192 BN128 row0=3, blocks 0,1 (1 masked)", 192, 192, 32, 0.0625, True, 3, 128, [0, 1])
    case("rows past keys slope 2 row0=2900 Nk=200", 3000, 200, 32, 2.0, False, 2900, 128)
    case("huge slope 1e37 causal row0=300", 700, 700, 32, 1e37, True, 300, 128, [0, 1, 2])
    case("huge slope 1e30 rows past keys row0=800 Nk=300", 900, 300, 32, 1e30, False, 800, 128)
    case("huge slope 1e9 rows past keys row0=800 Nk=300", 900, 300, 32, 1e9, False, 800, 128)
    case("huge slope 1e20 causal row0=500", 700, 700, 32, 1e20, True, 500, 128, [0, 1, 2, 3])
    case("negative slope -1e8 non-causal row0=100", 700, 700, 32, -1e8, False, 100, 128)
    case("tail block: Nk=300, rows past, slope 3", 900, 300, 32, 3.0, False, 700, 128)
    case("slope 8 rows 4000 past Nk=512", 4600, 512, 32, 8.0, False, 4500, 128)
    # the tail block's last key on a row0 (Nk - 1 = 999 = 7 mod 16): the left branch's reference key
    # is that row's own, at distance 0 (an FFMA's rounding there is the heaviest key's, undamped)
    for s in (0.5, 8.0, 30.0, 1e3, 1e20, 1e30):
        case(f"causal Nk=1000 row0=999 slope {s:g}", 1008, 1000, 32, s, True, 999, 128, [4, 5, 6, 7])
    for s in (8.0, 1e3, -8.0):
        case(f"noncausal Nk=1000 row0=999 slope {s:g}", 1008, 1000, 32, s, False, 999, 128)
