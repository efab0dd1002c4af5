# From the review of the ALiBi patch (bench/LOG.md 2026-12-06-alibi-plain): causal calls with negative slopes, the
# rows whose first block straddles them (MODE as faithful.py; hybrid takes key0 as their reference).
# Causal, negative slope: rows in the first half of block 0 take the block's last key (masked) as reference.
import numpy as np, math, sys
import faithful as F
rng = np.random.default_rng(0)
BN = int(sys.argv[1]) if len(sys.argv) > 1 else 128
Nq = Nk = 2 * BN; d = 32
q = rng.standard_normal((Nq, d)).astype(np.float16).astype(np.float32)
k = rng.standard_normal((Nk, d)).astype(np.float16).astype(np.float32)
v = rng.standard_normal((Nk, d)).astype(np.float16).astype(np.float32)
scale = 1 / math.sqrt(d)
for s in (-1e3, -1e5, -1e6, -1e7, -1e8, -1e12, -1e20, -1e30, -1e35):
    nan = 0; worst_o = 0; worst_l = 0; worst_rel = 0
    for row0 in list(range(0, 8)) + list(range(16, 24)) + list(range(32, 40)) + [48, 49, 50, 51]:
        if row0 + 8 >= BN: continue
        O, L, st = F.run_row0(q, k, v, row0, s, scale, True, BN, [0, 1], False)
        R, RL = F.ref(q, k, v, [row0, row0 + 8], s, scale, True)
        for r in range(2):
            if not np.isfinite(O[r]).all() or not np.isfinite(L[r]): nan += 1; continue
            worst_o = max(worst_o, np.abs(O[r] - R[r]).max()); worst_l = max(worst_l, abs(L[r] - RL[r]))
            worst_rel = max(worst_rel, abs(L[r] - RL[r]) / abs(RL[r]))
    # the test's lse bound ~ 2 x fp32 PyTorch error at the largest term in a 700-row call: |s| * 699 * 2^-24
    print(f"BN {BN} slope {s:8.0e}: rows non-finite {nan:3d}/56  out err {worst_o:.2e}  lse err {worst_l:.3e} (rel {worst_rel:.1e}; 700-row bound ~{2*abs(s)*699*2**-24+1e-4:.1e})", flush=True)
