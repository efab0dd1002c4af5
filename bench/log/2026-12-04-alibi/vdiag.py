# Why the table's packed point (bench.variants) times ours ~7 % below tools/sm90/varlen.py on the same lengths.
import json, sys, torch, triton
sys.path.insert(0, ".")
import torch_flashattn
from torch_flashattn._testing import exact_path, overrides
from bench.variants import POINTS, make, packed
def bench(fn): return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")
p = [x for x in POINTS if x["name"] == "varlen 8 × 1k–4k"][0]
H, d = 16, 128
q, k, v, kw, lengths = make(p, H, d, torch.bfloat16)
pk = packed(p, q, k, v, lengths)
T = sum(lengths)
g = torch.Generator(device="cuda").manual_seed(0)
q2, k2, v2 = (torch.randn(T, H, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
fl = 4.0 * d * H * sum(L * L for L in lengths)
A = lambda: torch_flashattn.attention_varlen(pk[0], pk[1], pk[2], pk[3], pk[3], pk[4], pk[4], causal=False)
B = lambda: torch_flashattn.attention_varlen(q2, k2, v2, pk[3], pk[3], pk[4], pk[4], causal=False)
C = lambda: torch_flashattn.attention_varlen(pk[0], pk[1], pk[2], pk[3], pk[3], pk[4], pk[4])
print("strides", pk[0].stride(), q2.stride(), pk[0].data_ptr() % 1024, q2.data_ptr() % 1024, pk[4], type(pk[4]))
print("absmax", pk[0].abs().max().item(), q2.abs().max().item(), pk[0].float().std().item(), q2.float().std().item())
r = {}
for tag, fn in [("bench-tensors", A), ("fresh-tensors", B), ("bench-tensors-nokw", C), ("bench-tensors2", A), ("fresh2", B)]:
    r[tag] = round(fl / bench(fn) / 1e9, 1)
with overrides(family="auto"):
    r["under-overrides"] = round(fl / bench(A) / 1e9, 1)
with exact_path():
    A()
r["after-exact"] = round(fl / bench(A) / 1e9, 1)
qb = q.clone()
r["bench-again"] = round(fl / bench(A) / 1e9, 1)
print(json.dumps(r))
