"""Float32 emulation of a row whose scores are NaN (NaN in q, or every visible key's score NaN:
q or k with NaN/inf) through the decode kernels' arithmetic, with the code lines mirrored.
fmaxf = np.fmax (IEEE maxNum: drops NaN), ex2 = exp2 (ex2.approx.ftz: NaN -> NaN, -inf -> 0).
MODE=fixed (environment): the fixed lines (l == 0 rather than l > 0 in the attend and simt kernels, NaN
partial lse tracked in the cluster merge), plus rows that see no key, which must stay 0 / -inf."""
import os
import numpy as np
FIXED = os.environ.get("MODE", "review") == "fixed"
import warnings; warnings.filterwarnings("ignore")
f32 = np.float32
NEG = f32(-np.inf)
ex2 = lambda x: np.exp2(f32(x)).astype(np.float32)
fmaxf = lambda a, b: f32(np.fmax(f32(a), f32(b)))

def attend_split(s_blocks, v_blocks):
    """decode_attend.cuh 447-497 (one warp, the quad reduction folded in), then 526-544 (one warp)."""
    m_i, l_i, o = NEG, f32(0), np.zeros(v_blocks[0].shape[1], np.float32)
    for s, v in zip(s_blocks, v_blocks):
        x = m_i
        for e in s: x = fmaxf(x, e)                      # 452-455
        m_ref = f32(0) if x == NEG else x                # 456
        alpha = ex2(m_i - m_ref); l_i = f32(l_i * alpha); m_i = x
        o = (o * alpha).astype(np.float32)
        p = np.array([ex2(e - m_ref) for e in s], np.float32)   # 479
        l_i = f32(l_i + p.sum(dtype=np.float32))
        o = (o + p @ v).astype(np.float32)               # mma: P V
    # warp merge 529-543
    M = m_i
    f = f32(0) if M == NEG else ex2(m_i - M)
    l = f32(l_i * f)
    if FIXED:                                            # l == 0: no key; NaN l stays NaN
        inv_l = f32(0) if l == 0 else f32(1) / l
        lse = NEG if l == 0 else M + np.log2(l)
    else:
        inv_l = f32(1) / l if l > 0 else f32(0)
        lse = (M + np.log2(l)) if l > 0 else NEG         # 543: NaN l reads as "no key"
    wt = f32(f * inv_l)
    return (o * wt).astype(np.float32), f32(lse)         # 554: val = part.o * wt

def combine_elem(parts):                                 # decode_simt.cu 160-214
    M, l, acc, nan_lse = NEG, f32(0), np.zeros_like(parts[0][0]), False
    x = [p[1] for p in parts]; y = [p[0] for p in parts]
    M_new = M
    for u in x: nan_lse |= bool(np.isnan(u)); M_new = fmaxf(M_new, u)
    if M_new != NEG:
        a = ex2(M - M_new); l *= a; acc *= a
        for u, yy in zip(x, y):
            w = ex2(u - M_new); l = f32(l + w); acc = (w * yy + acc).astype(np.float32)
        M = M_new
    if nan_lse: return np.full_like(acc, np.nan), np.nan
    inv_l = f32(1) / l if l > 0 else f32(0)
    return acc * inv_l, ((M + np.log2(l)) * 0.6931472 if l > 0 else -np.inf)

def cluster(parts):                                       # decode_attend.cuh 82-109
    M = NEG; nan = False
    for _, ls in parts: M = fmaxf(M, ls); nan |= bool(np.isnan(ls))
    l, o = f32(0), np.zeros_like(parts[0][0])
    if M != NEG:
        for os_, ls in parts:
            w = ex2(ls - M); l = f32(l + w); o = (o + w * os_).astype(np.float32)
    if FIXED:                                            # a NaN partial lse: a NaN row
        if nan: return np.full_like(o, np.nan), np.nan
        return (np.zeros_like(o) if l == 0 else o / l), (-np.inf if l == 0 else (M + np.log2(l)) * 0.6931472)
    return (o / l if l > 0 else np.zeros_like(o)), ((M + np.log2(l)) * 0.6931472 if l > 0 else -np.inf)

def combine_wide(parts):                                  # decode_simt.cu 249-322, non-sink
    M = NEG; nan = False
    for _, ls in parts: M = fmaxf(M, ls); nan |= bool(np.isnan(ls))
    Mr = f32(0) if M == NEG else M
    w = [ex2(ls - Mr) for _, ls in parts]; l = f32(sum(w))
    r_o = sum((wi * os_ for wi, (os_, _) in zip(w, parts)), np.zeros_like(parts[0][0]))
    if nan: return np.full_like(r_o, np.nan), np.nan
    return (r_o / l if l > 0 else np.zeros_like(r_o)), ((M + np.log2(l)) * 0.6931472 if l > 0 else -np.inf)

def simt(s_all, v_all):                                   # decode_simt.cu 75-129
    m_i, l_i, o = NEG, f32(0), np.zeros(v_all.shape[1], np.float32)
    for j in range(0, len(s_all), 4):
        s = s_all[j:j + 4]; m_new = m_i
        for e in s: m_new = fmaxf(m_new, e)
        alpha = ex2(m_i - m_new); l_i = f32(l_i * alpha); o = (o * alpha).astype(np.float32)
        for e, vv in zip(s, v_all[j:j + 4]):
            pu = ex2(e - m_new); l_i = f32(l_i + pu); o = (o + pu * vv).astype(np.float32)
        m_i = m_new
    if FIXED:
        return (np.zeros_like(o) if l_i == 0 else o / l_i), (NEG if l_i == 0 else m_i + np.log2(l_i))
    lse = m_i + np.log2(l_i) if l_i > 0 else NEG
    return (o / l_i if l_i > 0 else np.zeros_like(o)), lse

rng = np.random.default_rng(1)
d, Nk = 4, 64
v = rng.standard_normal((Nk, d)).astype(np.float32)
for name, s in [("NaN in q (every score NaN)", np.full(Nk, np.nan, np.float32)),
                ("one NaN key among finite ones", np.where(np.arange(Nk) == 5, np.nan, rng.standard_normal(Nk)).astype(np.float32)),
                ("+inf key (q·k = +inf)", np.where(np.arange(Nk) == 40, np.inf, rng.standard_normal(Nk)).astype(np.float32))]:
    print(f"== {name}: SDPA gives NaN for this row")
    one = attend_split([s[i:i + 16] for i in range(0, Nk, 16)], [v[i:i + 16] for i in range(0, Nk, 16)])
    print("  tensor-core, 1 split : out", one[0], "lse", one[1])
    halves = [attend_split([s[h:h + 16], s[h + 16:h + 32]], [v[h:h + 16], v[h + 16:h + 32]]) for h in (0, 32)]
    print("  split partials (O, lse2):", [(p[0][:2], p[1]) for p in halves])
    print("  2 splits, combine kernel:", combine_elem(halves))
    print("  2 splits, cluster merge :", cluster(halves))
    print("  2 splits, wide combine  :", combine_wide(halves))
    print("  simt kernel, 1 split    :", simt(s, v))

print("== simt kernel (fp32 caches), 2 splits, one NaN key in split 0: SDPA gives NaN")
s = np.where(np.arange(Nk) == 5, np.nan, rng.standard_normal(Nk)).astype(np.float32)
def simt_part(s, v):
    o, lse = simt(s, v)
    return o, lse                                      # store_result: val (0 when l NaN), lse2 (-inf)
parts = [simt_part(s[:32], v[:32]), simt_part(s[32:], v[32:])]
print("  partials:", [(p[0][:2], p[1]) for p in parts])
out, lse = combine_elem(parts)
s64 = s[32:].astype(np.float64) * 1.0
ref_other = (np.exp2(s64 - s64.max()) @ v[32:]) / np.exp2(s64 - s64.max()).sum()
print("  combined:", out, "lse", lse)
print("  the softmax over split 1's keys alone:", ref_other.astype(np.float32))

if FIXED:
    print("== rows that see no key (fixed mode: unchanged, 0 / -inf)")
    masked = np.full(Nk, -np.inf, np.float32)
    empty = attend_split([masked[i:i + 16] for i in range(0, Nk, 16)], [v[i:i + 16] for i in range(0, Nk, 16)])
    print("  tensor-core, every key masked:", empty[0], "lse", empty[1])
    print("  simt kernel, split with no key:", simt(np.zeros(0, np.float32), v[:0]))
    print("  2 splits, both empty, combine / cluster / wide:", combine_elem([empty, empty]), cluster([empty, empty]),
          combine_wide([empty, empty]))
    s = rng.standard_normal(Nk).astype(np.float32)
    full = attend_split([s[i:i + 16] for i in range(0, Nk, 16)], [v[i:i + 16] for i in range(0, Nk, 16)])
    s64 = s.astype(np.float64); p64 = np.exp2(s64 - s64.max())
    print("  one empty split + one full: combine", combine_elem([empty, full])[0], "cluster", cluster([empty, full])[0],
          "\n    float64:", (p64 @ v) / p64.sum())
