"""Case 6769 of the small CPU profile (FA_RANDOM_MAX_N=200: fp32, Nq = 2, Nk = 65, d = 200, scale 2):
its output error against the float64 reference when each score is summed over d in a given fp32
order (float64 products, fp32 rounding after each addition), the rest exact.
    FA_RANDOM_MAX_N=200 PYTHONPATH=. python3 bench/log/2026-12-06-fourth/emu_6769.py"""
import sys
sys.path.insert(0, "tests")
import torch, math
from test_random import draw_case, make_inputs
from conftest import reference
import torch_flashattn
c = draw_case(6769); q, k, v = make_inputs(c, "cpu")
ref = reference(q, k, v, False, 2.0)
out = torch_flashattn.attention(q, k, v, scale=2.0)
cf = torch.tensor(2.0 * 1.4426950408889634, dtype=torch.float32).item()
e = math.frexp(cf)[1]; f = cf / 2**e
qs = (q * torch.tensor(f, dtype=torch.float32))
def f32sum_chunks(a, b, KC):   # a (..., n, d), b (..., m, d): fp32 fma term after term within chunks of KC, chunks added
    d = a.shape[-1]
    tot = torch.zeros(a.shape[:-1] + (b.shape[-2],), dtype=torch.float32)
    for c0 in range(0, d, KC):
        acc = torch.zeros_like(tot)
        for i in range(c0, min(d, c0 + KC)):
            acc = (acc.double() + a[..., i:i+1].double() * b[..., i].double().unsqueeze(-2)).float()
        tot = tot + acc if c0 else acc
    return tot
for KC in (1000, 32, 16, 8, 4):
    s = f32sum_chunks(qs, k, KC).double() * 2**e
    m = s.amax(-1, keepdim=True)
    p = torch.exp2(s - m)
    o = (p @ v.double()) / p.sum(-1, keepdim=True)
    print(KC, "score-sum error only:", (o - ref).abs().max().item())
s = (qs.double() @ k.double().transpose(-1, -2)).float().double() * 2**e
m = s.amax(-1, keepdim=True)
p = torch.exp2((s - m).float().double()).float().double()
o = (p @ v.double()) / p.sum(-1, keepdim=True)
print("rounded S - m, rounded P:", (o - ref).abs().max().item())
print("ours", (out.double() - ref).abs().max().item())
def pairwise(a, b):
    t = [(a[..., i:i+1].double() * b[..., i].double().unsqueeze(-2)).float() for i in range(a.shape[-1])]
    while len(t) > 1:
        t = [(t[i].double() + t[i+1].double()).float() if i + 1 < len(t) else t[i] for i in range(0, len(t), 2)]
    return t[0]
def lanes(a, b, L):   # L interleaved fp32 accumulators (k mod L), then added in order
    d = a.shape[-1]; acc = [torch.zeros(a.shape[:-1] + (b.shape[-2],), dtype=torch.float32) for _ in range(L)]
    for i in range(d):
        acc[i % L] = (acc[i % L].double() + a[..., i:i+1].double() * b[..., i].double().unsqueeze(-2)).float()
    tot = acc[0]
    for x in acc[1:]: tot = (tot.double() + x.double()).float()
    return tot
def err_of(s32):
    s = s32.double() * 2**e
    m = s.amax(-1, keepdim=True); p = torch.exp2(s - m)
    return ((p @ v.double()) / p.sum(-1, keepdim=True) - ref).abs().max().item()
print("pairwise", err_of(pairwise(qs, k)))
for L in (2, 4, 8, 16):
    print("lanes", L, err_of(lanes(qs, k, L)))
