"""float32 emulation of the plain Hopper / sm_80 kernels' online softmax at huge scores (README Limits),
three ways, against a float64 softmax:

    today   P = exp2(fma(s, c, -fl(m c))), alpha = exp2((m_old - m) c)        (the one-fma form)
    fixed   where |fl(m c)| >= 2^20: P = exp2(fma(s, c, -fl(m c)) - res), res = m c - fl(m c)
            (one fma, exact), alpha as today                                  (score-limit branch)
    review  where |fl(m c)| >= 2^20: P = exp2(fl(s c) - fl(m c)),
            alpha = exp2(fl(m_old c) - fl(m c))                               (the review's proposal)

Per row and block of BN keys: m = max(m_old, rowmax(S)); l = l alpha + sum P (fp32); P rounded to
fp16 / bf16 for P V (fp32 accumulate); O = O alpha + P V; out = O (1/l) in the dtype;
lse = (fl(m c) + log2 l) ln 2. exp2 is ex2.approx.ftz (exact here, outputs below 2^-126 flushed);
fma is emulated in long double (64-bit mantissa). S = q k in fp32 (numpy's float32 matmul), scale
chosen so that the largest |scale q k| is each target, as score_limit.py does. A row counts as
broken when it holds inf / NaN or is all 0 while float64's row is finite, wrong when otherwise more
than 0.02 off anywhere (score_limit.py's rule); worst: the largest |out - float64| of the rows not
broken; lse: the largest |lse - float64| / |float64| there.

    python3 bench/log/2026-12-06-alibi-v3/score_emu.py > bench/log/2026-12-06-alibi-v3/score_emu.txt
"""
import numpy as np

f32 = np.float32
LD = np.longdouble
LOG2E = f32(1.4426950408889634)
LN2 = f32(0.69314718055994531)
BOUND = f32(2.0 ** 20)


def to_dtype(x, dt):
    """x (float32 array) rounded to fp16 or bf16 (nearest even), returned as float32."""
    x = np.asarray(x, np.float32)
    if dt == "fp16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16).astype(np.float32)
    b = x.view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, r)


def fma(a, b, c):
    return (np.asarray(a, LD) * np.asarray(b, LD) + np.asarray(c, LD)).astype(np.float32)


def ex2(x):
    x = np.asarray(x, np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.exp2(x.astype(np.float64)).astype(np.float32)
    return np.where(np.abs(y) < np.finfo(np.float32).tiny, f32(0), y)


def kernel(S, V, scale, dt, mode, BN):
    """S: (rows, Nk) fp32 scores q k; V: (Nk, d) in the dtype (as float32). Returns out, lse (fp32)."""
    rows, Nk = S.shape
    c = max(f32(abs(f32(scale)) * LOG2E), np.finfo(np.float32).tiny)
    m = np.full(rows, -np.inf, np.float32)
    l = np.zeros(rows, np.float32)
    O = np.zeros((rows, V.shape[1]), np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for k0 in range(0, Nk, BN):
            s = S[:, k0:k0 + BN]
            m_new = np.maximum(m, s.max(1))
            mc = (m_new * c).astype(np.float32)
            slow = np.abs(mc) >= BOUND if mode != "today" else np.zeros(rows, bool)
            alpha = ex2(((m - m_new) * c).astype(np.float32))
            if mode == "review":
                mco = (m * c).astype(np.float32)
                alpha = np.where(slow, ex2((mco - mc).astype(np.float32)), alpha)
            x = fma(s, c, -mc[:, None])
            if mode == "fixed":
                res = np.where(slow, fma(m_new, c, -mc), f32(0))
                x = (x - res[:, None]).astype(np.float32)
            elif mode == "review":
                x = np.where(slow[:, None], ((s * c).astype(np.float32) - mc[:, None]).astype(np.float32), x)
            P = ex2(x)
            l = (l * alpha + P.sum(1, dtype=np.float32)).astype(np.float32)
            O = (O * alpha[:, None] + to_dtype(P, dt) @ V[k0:k0 + BN]).astype(np.float32)
            m = m_new
        out = to_dtype(O * (f32(1) / l)[:, None], dt)
        lse = ((m * c).astype(np.float32) + np.log2(l.astype(np.float64)).astype(np.float32)) * LN2
    return out, lse.astype(np.float32)


def reference(s64, v):
    mx = s64.max(1, keepdims=True)
    p = np.exp(s64 - mx)
    return (p @ v.astype(np.float64)) / p.sum(1, keepdims=True), (mx[:, 0] + np.log(p.sum(1)))


def report(name, S, s64, v, scale, dt, BN):
    """S: the kernel's fp32 scores q k; s64: float64 scores scale q k for the reference."""
    ref, rlse = reference(s64, v)
    line = f"{name:30s}"
    for mode in ("today", "fixed", "review"):
        out, lse = kernel(S, v, scale, dt, mode, BN)
        fin = np.isfinite(out).all(1)
        zero = (out == 0).all(1) & (np.abs(ref).max(1) > 0)
        broken = ~fin | zero
        err = np.abs(out.astype(np.float64) - ref).max(1)
        wrong = ~broken & (err > 0.02)
        ok = ~broken
        worst = err[ok].max() if ok.any() else float("nan")
        lerr = np.abs(lse.astype(np.float64) - rlse) / np.abs(rlse)
        line += (f" | {mode:6s} broken {int(broken.sum()):3d} wrong {int(wrong.sum()):3d} worst {worst:7.2g}"
                 f" lse {lerr[ok].max() if ok.any() else float('nan'):7.1e}")
    print(line, flush=True)


def case(name, q, k, v, scale, dt, BN):
    report(name, (q @ k.T).astype(np.float32), (q.astype(np.float64) @ k.astype(np.float64).T) * scale, v, scale,
           dt, BN)


rng = np.random.default_rng(0)
N, d = 512, 64
print(f"random rows: q, k, v randn (N = {N} query rows and keys, d = {d}), rounded to the dtype\n")
for dt in ("fp16", "bf16"):
    q, k, v = (to_dtype(rng.standard_normal((N, d)).astype(np.float32), dt) for _ in range(3))
    top = np.abs(q.astype(np.float64) @ k.astype(np.float64).T).max()
    for BN in (128, 80):
        for target in (1e5, 5e5, 1e6, 3e6, 1e7, 1e8, 2e8, 4e8, 1e9, 3e9, 1e10, 1e12, 1e15, 1e20, 1e25, 1e30):
            case(f"{dt} BN {BN:3d} score {target:7.0e}", q, k, v, target / top, dt, BN)
        print()

print("the review's reproducer (plain_fp16_repro.py): fp16, d = 64, q = k0 = 2.5, 7 random keys, v0 = 1")
q = np.full((1, d), 2.5, np.float32)
K = to_dtype(np.random.default_rng(3).standard_normal((8, d)).astype(np.float32), "fp16")
K[0] = q[0]
V = to_dtype(np.random.default_rng(4).standard_normal((8, d)).astype(np.float32), "fp16")
V[0] = 1.0
for scale in (1.0e6, 1.002e6, 1.003e6, 1.5e6, 2e7):
    case(f"fp16 repro scale {scale:.4g}", q, K, V, float(f32(scale)), "fp16", 128)
print("fractional residues: fp16, q random (|q| ~ 30), k0 = q")
qq = to_dtype((np.random.default_rng(5).standard_normal((1, d)) * 30).astype(np.float32), "fp16")
K[0] = qq[0]
for scale in (30000, 30030, 30060, 30090, 1e6, 1e20 / 5e4):
    case(f"fp16 frac scale {scale:.5g}", qq, K, V, float(f32(scale)), "fp16", 128)
print("near ties across blocks: fp32 scores x (key 5, block 0) and x + j ulps (key 200, block 1), others -inf;")
print("v = +1 and -1 there; reference: float64 softmax of the same fp32 scores; |m c| about 2^e")
for dt in ("fp16", "bf16"):
    for e in (19, 20.5, 24, 30, 40):
        for j in (1, 3):
            x = f32(1000.0)
            S = np.full((1, 256), -np.inf, np.float32)
            S[0, 5] = x
            S[0, 200] = x
            for _ in range(j):
                S[0, 200] = np.nextafter(S[0, 200], f32(np.inf))
            scale = float(f32(2.0 ** e / 1000 / 1.4426950408889634))
            V = np.zeros((256, 8), np.float32)
            V[5], V[200] = 1.0, -1.0
            report(f"{dt} tie 2^{e} +{j} ulp", S, S.astype(np.float64) * scale, V, scale, dt, 128)
