# From the review of the ALiBi patch (bench/LOG.md 2026-12-06-alibi-plain): large logits (q scaled by sigma), the
# test rule's bound against the emulated kernel (MODE as faithful.py).
# The one-sided blocks' slope with its 8 low bits cleared (slt): each key's exponent is off by
# (sl - slt)/sl * slope * (key - ref) nats; where a row's heavy keys lie far from their block's
# reference key, lse (and out) carry that error. Test rule: 2 x pytorch_like's error (fp32 scores,
# over ALL rows of the call) + 1e-4 (lse) / + 1e-5 (out, fp16 slack).
import numpy as np, math, sys, os
import faithful as F
sigma = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
slope = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5
d = 128; BN = 128; Nq = Nk = 512
rng = np.random.default_rng(1)
q = (rng.standard_normal((Nq, d)) * sigma).astype(np.float16).astype(np.float32)
k = rng.standard_normal((Nk, d)).astype(np.float16).astype(np.float32)
v = rng.standard_normal((Nk, d)).astype(np.float16).astype(np.float32)
scale = 1 / math.sqrt(d)
# pytorch_like: fp32 scores and softmax, P rounded to fp16 before P V, over every row
s32 = (q.astype(np.float32) @ k.T.astype(np.float32)) * np.float32(scale)
rel = (np.arange(Nq)[:, None] - np.arange(Nk)[None, :]).astype(np.float32)
s32 = s32 - np.float32(slope) * np.abs(rel)
s32 = np.where(rel < 0, -np.inf, s32).astype(np.float32)
m = s32.max(1, keepdims=True); p = np.exp(s32 - m).astype(np.float32); den = p.sum(1, keepdims=True, dtype=np.float32)
lse32 = (np.log(den) + m)[:, 0]
out32 = ((p.astype(np.float16).astype(np.float32) @ v) / den).astype(np.float16).astype(np.float64)
R, RL = F.ref(q, k, v, list(range(Nq)), slope, scale, True)
err_pt_lse = np.abs(lse32 - RL).max(); err_pt_out = np.abs(out32 - R).max()
print(f"sigma {sigma} slope {slope}: pytorch_like max errors over all {Nq} rows: out {err_pt_out:.2e}, lse {err_pt_lse:.2e}; "
      f"bounds: out {2*err_pt_out+1e-5:.2e}, lse {2*err_pt_lse+1e-4:.2e}")
rows = [129, 131, 133, 257, 260, 385, 390]
worst_l = worst_o = 0
for row0 in rows:
    O, L, _ = F.run_row0(q, k, v, row0, slope, scale, True, BN, [0, 1, 2, 3], False)
    for r in range(2):
        el = abs(L[r] - RL[row0 + 8 * r]); eo = np.abs(O[r] - R[row0 + 8 * r]).max()
        worst_l = max(worst_l, el); worst_o = max(worst_o, eo)
print(f"  MODE={F.MODE}: kernel emulation, rows {rows} (+8): lse err {worst_l:.2e}  out err (fp32, before fp16 rounding) {worst_o:.2e}", flush=True)
