"""The softcap kernel's numerics emulated on the CPU: today's online softmax against a softmax
with no row max ("cap-free": a softcap bounds every score by the cap, so exp2((t - 1) · c) never
passes 1 and the max's FMNMX, shuffles and rescale could go). bf16 inputs, 128-key blocks, P
rounded to bf16 for P V with fp32 sums, as the kernel does; the cap-free form switches a row block
to the fixed shift once every row's running max t is at least 1 - 80 / c (the heaviest P then at
least 2^-80). "_r": l summed from the rounded P (as a ones column in P V would). Errors against
float64, before the output's own rounding: mean and max over the output.

    python3 bench/log/2026-12-07/capfree_emu.py > capfree_emu.txt
"""
import math

import torch

LOG2E = 1.4426950408889634


def emulate(q, k, v, scale, cap, free, rounded_l, BN=128, L=80.0):
    t = torch.tanh((q.float() @ k.float().T) * (scale / cap))
    c = cap * LOG2E
    m = torch.full((q.shape[0],), -math.inf)
    l, o, fixed = torch.zeros(q.shape[0]), torch.zeros(q.shape[0], v.shape[1]), False
    for k0 in range(0, k.shape[0], BN):
        tb = t[:, k0:k0 + BN]
        mn = m if fixed else torch.maximum(m, tb.max(1).values)
        alpha = torch.where(torch.isinf(m), torch.zeros_like(m), torch.exp2((m - mn) * c))
        p = torch.exp2((tb.double() * c - (mn.double() * c)[:, None]).float())
        pr = p.bfloat16().float()
        l = l * alpha + (pr if rounded_l else p).sum(1)
        o = o * alpha[:, None] + pr @ v[k0:k0 + BN].float()
        m = mn
        if free and not fixed and bool((m >= 1 - L / c).all()):
            alpha = torch.exp2((m - 1) * c)
            l, o, m, fixed = l * alpha, o * alpha[:, None], torch.ones_like(m), True
    return o / l[:, None]


def reference(q, k, v, scale, cap):
    s = cap * torch.tanh((q.double() @ k.double().T) * scale / cap)
    return torch.softmax(s, -1) @ v.double()


def main():
    torch.manual_seed(0)
    forms = {"online": (False, False), "online_r": (False, True), "free": (True, False), "free_r": (True, True)}
    worst = {f: 0.0 for f in forms}
    print("d N M cap q_std scale | mean error (max error) of " + ", ".join(forms))
    for d, N, M, cap, q_std, s in [(dd, nn, mm, cc, qq, ss) for dd, nn in ((64, 100), (128, 300), (256, 300))
                                   for mm in (257, 2048, 4096) for cc in (1.0, 5.0, 30.0, 50.0)
                                   for qq, ss in ((1.0, 1.0), (3.0, 1.0), (10.0, 0.3))]:
        scale = s / math.sqrt(d)
        q = (torch.randn(N, d) * q_std).bfloat16()
        k, v = torch.randn(M, d).bfloat16(), torch.randn(M, d).bfloat16()
        ref = reference(q, k, v, scale, cap)
        errs = {f: (emulate(q, k, v, scale, cap, *forms[f]).double() - ref).abs() for f in forms}
        for f in forms:
            worst[f] = max(worst[f], errs[f].mean().item() / errs["online"].mean().item())
        print(f"{d} {N} {M} {cap} {q_std} {scale:.3f} | " +
              ", ".join(f"{e.mean().item():.2e} ({e.max().item():.2e})" for e in errs.values()), flush=True)
    print("largest mean error against online's: " + ", ".join(f"{f} {w:.2f}" for f, w in worst.items()))


if __name__ == "__main__":
    main()
