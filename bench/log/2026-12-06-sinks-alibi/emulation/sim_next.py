import torch, math, numpy as np, sys
torch.set_default_dtype(torch.float64)
LOG2E = np.float32(1.4426950408889634)
import importlib.util
exec(open(__file__.replace('sim_next.py', 'sim.py')).read().split('def run(')[0])
BN = 128
f32 = lambda x: x.to(torch.float32).double()

def kernel(q, k, v, slope, scale, rows, dtype, version):
    d = q.shape[1]; Nk = k.shape[0]
    c = float(np.float32(np.float32(scale) * LOG2E))
    sl = float(np.float32(np.float32(np.float32(slope) * LOG2E) / np.float32(c)))
    qd, kd = q.double()[rows], k.double()
    S = torch.empty(len(rows), Nk); OFF = torch.zeros(len(rows), Nk)
    for key0 in range(0, Nk, BN):
        j = torch.arange(key0, min(key0 + BN, Nk))
        dist = (rows[:, None] - j[None, :]).abs().double()
        if version == 'v1':
            init = f32(-sl * dist); off = torch.zeros(len(rows), 1)
        else:
            near = rows.clamp(key0, key0 + BN - 1)
            off = f32(-sl * (rows - near).abs().double())[:, None]
            init = f32(-sl * dist - off)          # fmaf(-sl, |d|, -off): one rounding
        acc = init
        for ch in range(d // 16):
            acc = f32(acc + qd[:, 16*ch:16*ch+16] @ kd[j][:, 16*ch:16*ch+16].T)
        S[:, j] = acc; OFF[:, j] = off.expand(-1, len(j))
    # true-unit max (per-block max + off, in fp32), then e = fp32(S*c + fp32(off*c - m*c))
    m = f32(S + OFF).max(1, keepdim=True).values
    mc = f32(m * c)
    add = f32(OFF * c - mc)
    e = f32(S * c + add)
    P = f32(torch.exp2(e))
    l = f32(P.sum(1, keepdim=True))
    O = (P.to(dtype).double() @ v.double()) / l
    lse = (mc + torch.log2(l)) * math.log(2)
    return O.to(dtype).double(), lse.squeeze(1)

def kernel_v2b(q, k, v, slope, scale, rows, dtype):
    d = q.shape[1]; Nk = k.shape[0]
    c = float(np.float32(np.float32(scale) * LOG2E))
    sl = float(np.float32(np.float32(np.float32(slope) * LOG2E) / np.float32(c)))
    s2 = float(np.float32(sl * c))
    qd, kd = q.double()[rows], k.double()
    m = torch.full((len(rows), 1), -math.inf); l = torch.zeros(len(rows), 1); O = torch.zeros(len(rows), v.shape[1])
    for key0 in range(0, Nk, BN):
        j = torch.arange(key0, min(key0 + BN, Nk))
        dist = (rows[:, None] - j[None, :]).abs().double()
        near = (rows - rows.clamp(key0, key0 + BN - 1)).abs().double()[:, None]
        acc = f32(-sl * dist + f32(sl * near))        # fmaf(-sl, |d|, sl*near)
        for ch in range(d // 16):
            acc = f32(acc + qd[:, 16*ch:16*ch+16] @ kd[j][:, 16*ch:16*ch+16].T)
        mb = acc.max(1, keepdim=True).values
        mnew = torch.maximum(m, f32(mb * c - s2 * near))
        alpha = f32(torch.exp2(f32(m - mnew)))
        add = f32(s2 * near + mnew)                   # fmaf(s2, near, m): exact product, one rounding
        P = f32(torch.exp2(f32(acc * c - add)))
        l = f32(l * alpha + P.sum(1, keepdim=True)); O = O * alpha + P.to(dtype).double() @ v.double()[j]
        m = mnew
    return (O / l).to(dtype).double(), ((m + torch.log2(l)) * math.log(2)).squeeze(1)

def kernel_v2c(q, k, v, slope, scale, rows, dtype):
    # the running max in two parts: ms = S'*c of its element (small), nm = its block's nearest-key distance
    d = q.shape[1]; Nk = k.shape[0]
    c = float(np.float32(np.float32(scale) * LOG2E))
    sl = float(np.float32(np.float32(np.float32(slope) * LOG2E) / np.float32(c)))
    s2 = float(np.float32(sl * c))
    qd, kd = q.double()[rows], k.double()
    n = len(rows)
    ms = torch.full((n, 1), -math.inf); nm = torch.zeros(n, 1); l = torch.zeros(n, 1); O = torch.zeros(n, v.shape[1])
    for key0 in range(0, Nk, BN):
        j = torch.arange(key0, min(key0 + BN, Nk))
        dist = (rows[:, None] - j[None, :]).abs().double()
        near = (rows - rows.clamp(key0, key0 + BN - 1)).abs().double()[:, None]
        acc = f32(-sl * dist + f32(sl * near))
        for ch in range(d // 16):
            acc = f32(acc + qd[:, 16*ch:16*ch+16] @ kd[j][:, 16*ch:16*ch+16].T)
        cand = f32(acc.max(1, keepdim=True).values * c)
        diff = torch.where(torch.isinf(ms), torch.full_like(ms, math.inf), f32(-s2 * (near - nm) + f32(cand - ms)))
        take = diff > 0
        alpha = torch.where(take, torch.where(torch.isinf(ms), torch.zeros_like(ms), f32(torch.exp2(f32(-diff)))), torch.ones_like(ms))
        ms = torch.where(take, cand, ms); nm = torch.where(take, near, nm)
        add = f32(-s2 * (near - nm) - ms)
        P = f32(torch.exp2(f32(acc * c + add)))
        l = f32(l * alpha + P.sum(1, keepdim=True)); O = O * alpha + P.to(dtype).double() @ v.double()[j]
    return (O / l).to(dtype).double(), ((ms - s2 * nm + torch.log2(l)) * math.log(2)).squeeze(1)

def var_kernel(q, k, v, slope, scale, rows, dtype):
    # the variant kernel: S = Q K^T (rounded per k-step from 0), then fmaf(S, c, -slope2*|d|)
    d = q.shape[1]; Nk = k.shape[0]
    c = float(np.float32(np.float32(scale) * LOG2E)); s2 = float(np.float32(np.float32(slope) * LOG2E))
    qd, kd = q.double()[rows], k.double()
    acc = torch.zeros(len(rows), Nk)
    for ch in range(d // 16):
        acc = f32(acc + qd[:, 16*ch:16*ch+16] @ kd[:, 16*ch:16*ch+16].T)
    dist = (rows[:, None] - torch.arange(Nk)[None, :]).abs().double()
    t = f32(acc * c + f32(-s2 * dist))
    m = t.max(1, keepdim=True).values
    P = f32(torch.exp2(f32(t - m))); l = f32(P.sum(1, keepdim=True))
    O = (P.to(dtype).double() @ v.double()) / l
    return O.to(dtype).double(), ((m + torch.log2(l)) * math.log(2)).squeeze(1)

def run(dtype, d, Nk, offsets, slope, seed=0):
    g = torch.Generator().manual_seed(seed)
    nrows = 64
    Nq = Nk + max(offsets) + nrows
    scale = 1 / math.sqrt(d)
    q = torch.randn(Nq, d, generator=g).to(dtype); k = torch.randn(Nk, d, generator=g).to(dtype); v = torch.randn(Nk, d, generator=g).to(dtype)
    for off in offsets:
        rows = torch.arange(Nk - 1 + off, Nk - 1 + off + nrows) if off >= 0 else torch.arange(0, Nk, max(1, Nk // nrows))
        R, Rl = ref(q, k, v, slope, scale, rows, torch.float64)
        Pt, Ptl = ref(q, k, v, slope, scale, rows, torch.float32, dtype)
        ept = (Pt.to(dtype).double() - R).abs().max().item(); eptl = (Ptl.double() - Rl).abs().max().item()
        out = []
        for name, fn in (('v1', lambda: kernel(q, k, v, slope, scale, rows, dtype, 'v1')),
                         ('v2', lambda: kernel(q, k, v, slope, scale, rows, dtype, 'v2')),
                         ('v2b', lambda: kernel_v2b(q, k, v, slope, scale, rows, dtype)),
                         ('v2c', lambda: kernel_v2c(q, k, v, slope, scale, rows, dtype)),
                         ('var', lambda: var_kernel(q, k, v, slope, scale, rows, dtype))):
            O, L = fn()
            out.append(f"{name} {(O - R).abs().max().item():.2e}/{(L - Rl).abs().max().item():.1e}")
        print(f"{str(dtype)[6:]:8s} d={d} Nk={Nk} off={off:6d} slope={slope:5}: bound {2*ept+1e-5:.2e} (lse pt {eptl:.1e}) | " + " | ".join(out), flush=True)

for dt in (torch.float16, torch.bfloat16):
    for slope in (0.5, -0.25, 2.0, 8.0):
        run(dt, 128, 512, [-1, 0, 4000, 16000], slope)
