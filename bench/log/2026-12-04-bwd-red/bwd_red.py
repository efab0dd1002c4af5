"""Dev A/B: the Hopper backward's dQ through shared memory + bulk reduction (0) against red.global.add.v4
from registers (1) and (2) = 1 with the next step's -D / lse2 read at the step's end. Usage: bwd_red.py LABEL"""
import json, os, sys
import torch
import torch.nn.functional as F
import torch_flashattn
from bench.attention import time_interleaved

label = sys.argv[1]
torch.manual_seed(0)


def grads(q, k, v, do, causal, var):
    os.environ["FA_DEV_BWD_RED"] = str(var)
    qq, kk, vv = (x.detach().requires_grad_() for x in (q, k, v))
    o = torch_flashattn.attention(qq, kk, vv, causal=causal)
    return torch.autograd.grad(o, (qq, kk, vv), do)


if label == "check":
    for (B, H, Hkv, Nq, Nk, d, causal) in [(2, 4, 2, 1000, 1100, 128, False), (2, 4, 2, 1000, 1100, 128, True),
                                           (1, 4, 1, 777, 777, 64, False), (2, 2, 2, 1000, 1100, 64, True),
                                           (1, 2, 2, 4096, 4096, 128, True), (3, 3, 3, 130, 200, 128, False)]:
        for dt in (torch.bfloat16, torch.float16):
            q = torch.randn(B, H, Nq, d, device="cuda", dtype=dt)
            k = torch.randn(B, Hkv, Nk, d, device="cuda", dtype=dt)
            v = torch.randn(B, Hkv, Nk, d, device="cuda", dtype=dt)
            do = torch.randn(B, H, Nq, d, device="cuda", dtype=dt)
            q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
            kr, vr = (x.repeat_interleave(H // Hkv, dim=1) for x in (k64, v64))
            o = F.scaled_dot_product_attention(q64, kr, vr, is_causal=causal)  # top-left, as ours (Nq != Nk)
            if causal and Nq != Nk:
                m = torch.ones(Nq, Nk, dtype=torch.bool, device="cuda").tril()
                o = F.scaled_dot_product_attention(q64, kr, vr, attn_mask=m)
            ref = torch.autograd.grad(o, (q64, k64, v64), do.double())
            row = {"shape": [B, H, Hkv, Nq, Nk, d, causal, str(dt)[6:]]}
            base = None
            for var in ((0, 1, 2) if d == 128 else (0, 1)):
                g = grads(q, k, v, do, causal, var)
                row[f"err{var}"] = [round(float((a.double() - r).abs().max() / r.abs().max()), 6) for a, r in zip(g, ref)]
                if base is None:
                    base = g
                else:
                    row[f"vs0_{var}"] = [float((a.float() - b.float()).abs().max()) for a, b in zip(g, base)]
            print(json.dumps(row), flush=True)
    sys.exit(0)

for d in (128, 64):
    for causal in (False, True):
        for N in (1024, 4096, 16384):
            B, H = 16384 // N, 2048 // d
            q, k, v, do = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
            qq, kk, vv = (x.requires_grad_() for x in (q.clone(), k.clone(), v.clone()))
            o = torch_flashattn.attention(qq, kk, vv, causal=causal)
            vars_ = (0, 1, 2) if d == 128 else (0, 1)

            def mk(var):
                def fn():
                    os.environ["FA_DEV_BWD_RED"] = str(var)
                    torch.autograd.grad(o, (qq, kk, vv), do, retain_graph=True)
                return fn
            ms = time_interleaved([mk(x) for x in vars_], 0.4)
            fl = 10 * B * H * N * N * d / (2 if causal else 1)
            print(json.dumps({"label": label, "d": d, "causal": causal, "N": N,
                              **{f"v{x}": round(fl / t / 1e9, 1) for x, t in zip(vars_, ms)}}), flush=True)
