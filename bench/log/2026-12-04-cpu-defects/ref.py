import math, torch
torch.set_num_threads(2)

def ref_attn(q, k, v, causal=False, scale=None, align="top_left", window=(-1,-1), softcap=None,
             alibi=None, sinks=None, key_mask=None, attn_mask=None, dt=torch.float64):
    """fp64 reference; q (B,Hq,Nq,d). returns out (B,Hq,Nq,d) f64, lse (B,Hq,Nq) f64"""
    q, k, v = q.to(dt), k.to(dt), v.to(dt)
    B, Hq, Nq, d = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    g = Hq // Hkv if Hkv else 1
    k = k.repeat_interleave(g, dim=1); v = v.repeat_interleave(g, dim=1)
    sc = 1/math.sqrt(d) if scale is None else scale
    s = sc * (q @ k.transpose(-1, -2))
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    delta = 0 if align == "top_left" else Nk - Nq
    i = torch.arange(Nq, dtype=dt).view(-1, 1)
    j = torch.arange(Nk, dtype=dt).view(1, -1)
    if alibi is not None:
        sl = alibi.to(dt)
        sl = sl.view(1, Hq, 1, 1) if sl.dim() == 1 else sl.view(B, Hq, 1, 1)
        s = s - sl * (i + delta - j).abs()
    vis = torch.ones(B, Hq, Nq, Nk, dtype=torch.bool)
    left, right = window
    if causal: right = 0
    if left >= 0: vis &= (i + delta - left <= j)
    if right >= 0: vis &= (j <= i + delta + right)
    if key_mask is not None:
        vis &= (key_mask != 0).view(B, 1, 1, Nk)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            vis &= attn_mask
        else:
            s = s + attn_mask.to(dt)
    s = s.masked_fill(~vis, -math.inf)
    if sinks is not None:
        sk = sinks.to(dt).view(1, Hq, 1, 1).expand(B, Hq, Nq, 1)
        s_all = torch.cat([s, sk], -1)
    else:
        s_all = s
    if s_all.shape[-1] == 0:
        lse = torch.full((B, Hq, Nq), -math.inf, dtype=dt)
        out = torch.zeros(B, Hq, Nq, v.shape[-1], dtype=dt)
        return out, lse
    anyv = (s_all > -math.inf).any(-1, keepdim=True) | torch.isnan(s_all).any(-1, keepdim=True)
    s_safe = torch.where(anyv, s_all, torch.zeros_like(s_all))
    mx = s_safe.max(-1, keepdim=True).values.detach()
    mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
    e = torch.exp(s_safe - mx)
    e = torch.where(anyv, e, torch.zeros_like(e))
    denom = e.sum(-1, keepdim=True)
    p = e[..., :Nk] / torch.where(anyv, denom, torch.ones_like(denom))
    out = p @ v
    lse = torch.where(anyv, mx + torch.log(torch.where(anyv, denom, torch.ones_like(denom))), torch.full_like(mx, -math.inf))[..., 0]
    return out, lse


def check(name, got, q, k, v, ref_kwargs, lse_got=None, slack=None, verbose=False):
    """compare got (package) vs fp64 ref, tol = 2*naive_err + slack"""
    dtype = q.dtype
    o64, l64 = ref_attn(q, k, v, **ref_kwargs)
    olp, llp = ref_attn(q, k, v, dt=dtype, **ref_kwargs)
    olp = olp.double()
    if slack is None:
        slack = 2e-6 if dtype == torch.float32 else 1e-5
    def err(a, b):
        a = a.double(); b = b.double()
        both_nan = torch.isnan(a) & torch.isnan(b)
        same_inf = (a == b)
        diff = (a - b).abs()
        diff = torch.where(both_nan | same_inf, torch.zeros_like(diff), diff)
        diff = torch.where(torch.isnan(diff), torch.full_like(diff, float('inf')), diff)
        return diff.max().item() if diff.numel() else 0.0
    e = err(got, o64); e0 = err(olp, o64)
    ok = e <= 2 * e0 + slack
    msgs = []
    if not ok: msgs.append(f"out err {e:.3g} > 2*{e0:.3g}+{slack}")
    if lse_got is not None:
        el = err(lse_got, l64)
        el0 = err(llp.float(), l64)
        fin = l64[torch.isfinite(l64)]
        lslack = 1e-5 + (2e-6 * fin.abs().max().item() if fin.numel() else 0.0)
        if not el <= 2*el0 + lslack:
            msgs.append(f"lse err {el:.3g} (naive {el0:.3g})")
            ok = False
    if got.dtype != dtype: msgs.append(f"dtype {got.dtype}"); ok=False
    if (not ok) or verbose:
        print(("FAIL " if not ok else "ok ") + name, "; ".join(msgs), f"e={e:.3g} e0={e0:.3g}")
    return ok
