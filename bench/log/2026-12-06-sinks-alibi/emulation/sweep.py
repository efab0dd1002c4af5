import numpy as np, math
from faithful import run_row0, f32
rng = np.random.default_rng(3)
BN = 64; d = 16
Nq, Nk = 400, 330
q = rng.standard_normal((Nq, d)).astype(np.float32); k = rng.standard_normal((Nk, d)).astype(np.float32); v = rng.standard_normal((Nk, d)).astype(np.float32)
scale = 1/math.sqrt(d)
def ref(rows, slope, causal, keys):
    s = (q[rows].astype(np.float64) @ k[keys].astype(np.float64).T) * scale
    s = s - slope*np.abs(np.array(rows)[:,None]-np.array(keys)[None,:])
    if causal: s = np.where(np.array(keys)[None,:] > np.array(rows)[:,None], -np.inf, s)
    m = s.max(1, keepdims=True); p = np.exp(s-m); den = p.sum(1, keepdims=True)
    return (p @ v[keys].astype(np.float64))/den, (np.log(den)+m)[:,0]
worst = 0; worstl = 0
row0s = sorted(set(list(range(0, 24)) + list(range(50, 80)) + list(range(120, 136)) + list(range(250, 270)) + list(range(320, 345)) + [380, 391]))
for slope in (0.3, -0.2, 3.0, 0.0):
    for causal in (False, True):
        for kbs in ([0,1,2,3,4,5], [2,3], [5], [3,4,5]):
            keys = [j for kb in kbs for j in range(kb*BN, min(kb*BN+BN, Nk))]
            for row0 in row0s:
                if row0 + 8 >= Nq: continue
                if causal and min(keys) > row0: continue
                R, RL = ref([row0, row0+8], slope, causal, keys)
                O, L, _ = run_row0(q, k, v, row0, slope, scale, causal, BN, kbs, False)
                e = max(np.abs(O[r]-R[r]).max() for r in range(2)); el = max(abs(L[r]-RL[r]) for r in range(2))
                if not (e < 1e-5 and el < 1e-4): print("BAD", slope, causal, kbs, row0, e, el)
                worst = max(worst, e); worstl = max(worstl, el)
print("worst out", worst, "worst lse", worstl)
