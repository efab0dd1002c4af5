import torch, math, numpy as np, sys
torch.set_default_dtype(torch.float64)
LOG2E = np.float32(1.4426950408889634)

def rz32(x):  # round float64 tensor toward zero to float32
    f = x.to(torch.float32)
    over = f.double().abs() > x.abs()
    f2 = torch.where(over, torch.nextafter(f, torch.zeros_like(f)), f)
    return f2

def kernel(q, k, v, slope, scale, rows, mode, dtype):
    # q (Nq,d) k,v (Nk,d) in dtype; rows: row indices (int tensor)
    d = q.shape[1]; Nk = k.shape[0]
    c = np.float32(np.float32(scale) * LOG2E)
    sl = np.float32(np.float32(np.float32(slope) * LOG2E) / c)
    j = torch.arange(Nk)
    dist = (rows[:, None] - j[None, :]).abs().double()
    init = (torch.tensor(-float(sl), dtype=torch.float32).double() * dist).to(torch.float32)
    acc = init
    qd, kd = q.double()[rows], k.double()
    for ch in range(d // 16):
        part = qd[:, 16*ch:16*ch+16] @ kd[:, 16*ch:16*ch+16].T
        tot = acc.double() + part
        acc = tot.to(torch.float32) if mode == 'rn' else rz32(tot)
    s = acc
    m = s.max(1, keepdim=True).values
    mc = (m.double() * float(c)).to(torch.float32)
    e = (s.double() * float(c) - mc.double()).to(torch.float32)
    P = torch.exp2(e.double()).to(torch.float32)
    l = P.double().sum(1, keepdim=True).to(torch.float32)
    Pr = P.to(dtype).double()
    O = (Pr @ v.double()) / l.double()
    lse = (m.double() * float(c) + torch.log2(l.double())) * math.log(2)
    return O.to(dtype).double(), lse.squeeze(1)

def ref(q, k, v, slope, scale, rows, compute, pdt=None):
    Nk = k.shape[0]
    j = torch.arange(Nk)
    rel = (rows[:, None] - j[None, :]).abs().to(compute)
    s = (q.to(compute)[rows] @ k.to(compute).T) * scale
    s = s - torch.tensor(slope, dtype=torch.float32).to(compute) * rel
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    den = p.sum(-1, keepdim=True)
    if pdt is not None: p = p.to(pdt).to(compute)
    out = (p @ v.to(compute)) / den
    lse = (torch.log(den) + m).squeeze(-1)
    return out, lse

def run(dtype, d, Nk, offsets, slope, seed=0, mode='rn'):
    g = torch.Generator().manual_seed(seed)
    nrows = 64
    Nq = Nk + max(offsets) + nrows
    scale = 1 / math.sqrt(d)
    q = torch.randn(Nq, d, generator=g).to(dtype); k = torch.randn(Nk, d, generator=g).to(dtype); v = torch.randn(Nk, d, generator=g).to(dtype)
    for off in offsets:
        rows = torch.arange(Nk - 1 + off, Nk - 1 + off + nrows) if off >= 0 else torch.arange(0, Nk, Nk//nrows)
        R, Rl = ref(q, k, v, slope, scale, rows, torch.float64)
        Pt, Ptl = ref(q, k, v, slope, scale, rows, torch.float32, dtype)
        Pt = Pt.to(dtype)
        res = []
        for md in ('rn', 'rz'):
            O, L = kernel(q, k, v, slope, scale, rows, md, dtype)
            res.append(((O - R).abs().max().item(), (L - Rl).abs().max().item()))
        ept = (Pt.double() - R).abs().max().item(); eptl = (Ptl.double() - Rl).abs().max().item()
        print(f"{str(dtype):15s} d={d} Nk={Nk} off={off:6d} slope={slope}: pt {ept:.2e} bound {2*ept+1e-5:.2e} | ours RN {res[0][0]:.2e} RZ {res[1][0]:.2e} || lse pt {eptl:.2e} ours RN {res[0][1]:.2e} RZ {res[1][1]:.2e}")

for dt in (torch.float16, torch.bfloat16):
    for slope in (0.25, 0.5, -0.25):
        run(dt, 128, 256, [-1, 0, 1000, 4000, 16000, 64000], slope)
