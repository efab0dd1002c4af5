"""Small shapes that exercise every CUDA kernel family, for compute-sanitizer (tests/sanitize.sh).

Covers sequence tails, Nq != Nk, causal, GQA, padded head dims, a (B, N, H, d)-transposed view
and a misaligned view (an aligned one for the Hopper kernel), with lse; the backward kernel's
gradients (both causal alignments, a window, sinks, softcap, ALiBi, key_mask, a loss using lse, on both
views; packed sequences, bad cu_seqlens among them); the Hopper kernel's
persistent CTAs walking several tiles each; and fa::forward_kvcache (split-KV decode: append, ragged
lengths, several splits, the tensor-core and SIMT kernels). Checks each result against the CPU backend so a
run that computes garbage fails even when the sanitizer sees nothing; scores of about 1e9 on the
kernels with exact exponents past |m · c| = 2^20 (sm90, sm80, turing), against a float64 softmax.
"""
import os
import sys

import torch

import torch_flashattn
from torch_flashattn._testing import set_overrides

CASES = [  # B, Hq, Hkv, Nq, Nk, d, causal
    (1, 2, 1, 17, 33, 40, True),
    (1, 2, 2, 65, 130, 64, False),
    (2, 4, 2, 100, 100, 128, True),
    (1, 1, 1, 1, 77, 256, False),
    (1, 2, 1, 70, 9, 80, True),
]
KVCACHE_CASES = [  # B, Hq, Hkv, Nq, Nmax, d, causal, seqlens before the append, Nnew, misaligned caches
    (2, 8, 2, 1, 1000, 128, True, [0, 998], 2, False),
    (3, 4, 4, 3, 300, 80, True, [1, 150, 297], 3, True),
    (1, 16, 2, 4, 515, 256, False, [515], 0, False),
    (2, 2, 1, 2, 70, 33, True, [5, 68], 1, True),
]
FAMILIES = {"simt": (torch.float32, torch.float16, torch.bfloat16), "sm80": (torch.float16, torch.bfloat16),
            "fp32tc": (torch.float32,), "fp32": (torch.float32,), "turing": (torch.float16,),
            "auto": (torch.float32, torch.float16, torch.bfloat16)}
# TMA: k rows must stay 16-byte aligned. initcheck does not count the Hopper kernel's TMA bulk
# stores as writes: it flags every element of its outputs (all of them, with every value right),
# so under initcheck (tests/sanitize.sh sets SANITIZE_TOOL) the family is left out.
if torch.cuda.get_device_capability() == (9, 0) and os.environ.get("SANITIZE_TOOL") != "initcheck":
    FAMILIES["sm90"] = (torch.float16, torch.bfloat16)


def check_forward(family, dtype, B, Hq, Hkv, Nq, Nk, d, causal, note=""):
    """One forward_lse call on a strided q, checked against the CPU backend; True when right."""
    q = torch.randn(B, Nq, Hq, d, device="cuda", dtype=dtype).transpose(1, 2)   # strided view
    # misaligned rows, except for sm90, which declines them (auto then runs sm80)
    k = (torch.randn(B, Hkv, Nk, d, device="cuda", dtype=dtype) if family == "sm90" else
         torch.randn(B, Hkv, Nk, d + 1, device="cuda", dtype=dtype)[..., 1:])
    v = torch.randn(B, Hkv, Nk, d, device="cuda", dtype=dtype)
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal)
    torch.cuda.synchronize()
    ref, ref_lse = torch_flashattn.attention_lse(q.float().cpu(), k.float().cpu(), v.float().cpu(), causal=causal)
    err = (out.float().cpu() - ref).abs().max().item()
    lse_err = (lse.cpu() - ref_lse).abs().max().item()
    ok = err < (1e-5 if dtype == torch.float32 else 2e-2) and lse_err < 1e-3
    print(f"{'ok  ' if ok else 'FAIL'} {family:5} {str(dtype):14} B={B} Hq={Hq} Hkv={Hkv} Nq={Nq} "
          f"Nk={Nk} d={d} causal={causal}{note}: max err {err:.1e}, lse err {lse_err:.1e}")
    return ok


def check_huge_scores(family, dtype, d, causal):
    """Scores of about 1e9 (past |m · c| = 2^20 in log2 units), so that the kernels that take each
    exponential relative to the row max's exact product (sm90, sm80, turing) run that branch: every row
    finite and, where a row's two largest scores are clearly apart, its output within two of the
    dtype's rounding steps of the float64 softmax (one-hot there); True when right."""
    q, k, v = (torch.randn(1, 2, 130, d, device="cuda").to(dtype) for _ in range(3))
    raw = q.double() @ k.double().transpose(-1, -2)
    if causal:
        raw = raw.masked_fill(torch.ones(130, 130, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    scale = 1e9 / raw[raw.isfinite()].abs().max().item()
    out = torch_flashattn.attention(q, k, v, causal=causal, scale=scale)
    torch.cuda.synchronize()
    ref = torch.softmax(raw * scale, dim=-1) @ v.double()
    top2 = raw.topk(2, dim=-1).values
    clear = (top2[..., 0] - top2[..., 1] > 1e-3) | (top2[..., 1] == float("-inf"))
    err = (out.double() - ref).abs().amax(-1)[clear].max().item()
    ok = bool(torch.isfinite(out).all()) and err <= 2 * torch.finfo(dtype).eps * v.abs().max().item()
    print(f"{'ok  ' if ok else 'FAIL'} {family:5} {str(dtype):14} d={d} causal={causal} scores 1e9: "
          f"max err {err:.1e}")
    return ok


def padded_key_mask(B, Nk):
    """key_mask rows the kernels scan for their ranges: left and right padding, none, holes."""
    m = torch.rand(B, Nk, device="cuda") < 0.9
    m[0, :Nk // 3] = False
    m[0, Nk // 3:] = True
    m[1, Nk - 40:] = False
    m[1, :Nk - 40] = True
    if B > 2:
        m[2] = False
    return m


def check_variants(dtype, B, Hq, Hkv, Nq, Nk, d, note, family="sm90", key_mask=None, attn_mask=True):
    """Every variant at once in the forced family's kernel, checked against the CPU backend; True
    when right. key_mask: instead of a random one (False: none); attn_mask False: none (a padded
    decoding step's call, which the split-KV kernel takes), "aligned": of q's dtype with rows TMA
    can load."""
    q = torch.randn(B, Nq, Hq, d, device="cuda", dtype=dtype).transpose(1, 2)
    k, v = (torch.randn(B, Hkv, Nk, d, device="cuda", dtype=dtype) for _ in range(2))
    kw = dict(causal=True, causal_align="bottom_right", window=(150, -1), softcap=20.0,
              alibi_slopes=torch.rand(B, Hq, device="cuda") * 0.05, sinks=torch.randn(Hq, device="cuda"),
              key_mask=torch.rand(B, Nk, device="cuda") < 0.9 if key_mask is None else key_mask)
    if key_mask is False:                   # neither mask: the packed walk can take the call
        del kw["key_mask"]
    if attn_mask == "aligned":              # q's dtype, 16-byte rows: the Hopper kernel stages it (d <= 128)
        kw["attn_mask"] = torch.randn(B, Hq, Nq, Nk + 11, device="cuda", dtype=dtype)[..., :Nk]
    elif attn_mask:
        kw["attn_mask"] = torch.randn(B, 1, Nk, Nq, device="cuda").transpose(-1, -2)
    out, lse = torch_flashattn.attention_lse(q, k, v, **kw)
    torch.cuda.synchronize()
    cpu = {n: x.cpu() if isinstance(x, torch.Tensor) else x for n, x in kw.items()}
    if cpu.get("attn_mask") is not None and cpu["attn_mask"].dtype == dtype:     # the reference runs in fp32
        cpu["attn_mask"] = cpu["attn_mask"].float()
    ref, ref_lse = torch_flashattn.attention_lse(q.float().cpu(), k.float().cpu(), v.float().cpu(), **cpu)
    err = (out.float().cpu() - ref).abs().max().item()
    fin = ref_lse.isfinite()
    lse_ok = torch.equal(fin, lse.cpu().isfinite()) and (lse.cpu()[fin] - ref_lse[fin]).abs().max().item() < 1e-3
    ok = err < 2e-2 and lse_ok
    print(f"{'ok  ' if ok else 'FAIL'} {family} variants {str(dtype):14} B={B} Hq={Hq} Hkv={Hkv} Nq={Nq} Nk={Nk} d={d} "
          f"{note}: max err {err:.1e}, lse {'ok' if lse_ok else 'WRONG'}")
    return ok


def check_plain_extra(what, B, Hq, Hkv, Nq, Nk, d, causal, note):
    """Sinks alone or ALiBi alone (what) on the Hopper kernel (sinks on the plain tiles' SINK
    instantiations), checked against the CPU backend; True when right."""
    q = torch.randn(B, Hq, Nq, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(B, Hkv, Nk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    kw = {"sinks": torch.randn(Hq, device="cuda")} if what == "sinks" else \
        {"alibi_slopes": torch.rand(B, Hq, device="cuda") * 0.1}
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal, **kw)
    torch.cuda.synchronize()
    ref, ref_lse = torch_flashattn.attention_lse(q.float().cpu(), k.float().cpu(), v.float().cpu(), causal=causal,
                                                 **{n: x.cpu() for n, x in kw.items()})
    err = (out.float().cpu() - ref).abs().max().item()
    lse_err = (lse.cpu() - ref_lse).abs().max().item()
    ok = err < 2e-2 and lse_err < 1e-3
    print(f"{'ok  ' if ok else 'FAIL'} sm90 {what} alone B={B} Hq={Hq} Hkv={Hkv} Nq={Nq} Nk={Nk} d={d} causal={causal}"
          f"{note}: max err {err:.1e}, lse {lse_err:.1e}")
    return ok


def packed_inputs(d, bad, device="cuda"):
    """(cu_seqlens_q, cu_seqlens_k on the CPU, q, k, v) of the packed cases: tails that end inside the
    next sequence's rows, an empty sequence, one query; bad: cu_seqlens_q decreasing."""
    lens_q, lens_k = [70, 0, 1, 300, 129], [90, 5, 64, 250, 129]
    cq, ck = (torch.tensor([0] + torch.tensor(n).cumsum(0).tolist(), dtype=torch.int32) for n in (lens_q, lens_k))
    if bad:
        cq[2] = 80
    q = torch.randn(sum(lens_q), 4, d, device=device, dtype=torch.bfloat16)
    k, v = (torch.randn(sum(lens_k), 2, d, device=device, dtype=torch.bfloat16) for _ in range(2))
    return cq, ck, q, k, v


def check_varlen(family, d, bad=False):
    """Packed sequences (tails that end inside the next sequence's rows, an empty one, one query)
    in the forced family's kernel against the CPU backend; bad: cu_seqlens that decrease, for the
    kernel's NaN fill. True when right."""
    cq, ck, q, k, v = packed_inputs(d, bad)
    kw = dict(causal=True, causal_align="bottom_right", window=(100, -1), softcap=20.0, sinks=torch.randn(4))
    out, lse = torch_flashattn.attention_varlen(q, k, v, cq.cuda(), ck.cuda(), 300, 250, return_lse=True,
                                                **{n: x.cuda() if isinstance(x, torch.Tensor) else x
                                                   for n, x in kw.items()})
    torch.cuda.synchronize()
    if bad:
        ok = bool(out.isnan().all() and lse.isnan().all())
        err = float("nan")
    else:
        ref, ref_lse = torch_flashattn.attention_varlen(q.float().cpu(), k.float().cpu(), v.float().cpu(), cq, ck,
                                                        300, 250, return_lse=True, **kw)
        err = (out.float().cpu() - ref).abs().max().item()
        fin = ref_lse.isfinite()
        ok = err < 2e-2 and torch.equal(fin, lse.cpu().isfinite()) and \
            (lse.cpu()[fin] - ref_lse[fin]).abs().max().item() < 1e-3
    print(f"{'ok  ' if ok else 'FAIL'} {family} varlen d={d}{' bad cu_seqlens -> NaN' if bad else ''}: max err {err:.1e}")
    return ok


BACKWARD_CASES = [  # B, Hq, Hkv, Nq, Nk, d, variants
    (1, 2, 1, 17, 33, 40, dict(causal=True)),
    (2, 4, 2, 130, 200, 64, dict(causal=True, causal_align="bottom_right")),
    (1, 3, 1, 200, 129, 128, dict(window=(30, 5))),
    (1, 2, 2, 70, 300, 96, dict(sinks=True, causal=True)),
    (2, 4, 2, 150, 280, 128, dict(softcap=5.0, alibi=True, key_mask=True, causal=True, causal_align="bottom_right")),
    (2, 2, 1, 90, 200, 64, dict(softcap=2.0, window=(50, 10), key_mask=True, sinks=True)),
]


def check_backward(dtype, B, Hq, Hkv, Nq, Nk, d, variants, layout):
    """The backward kernels (on Hopper sm90_backward.cu for strided views, sm80_backward.cu for misaligned
    ones, whose rows TMA cannot read) on a strided (layout "bnhd") or a misaligned view
    against the CPU backend's gradients, the loss using lse too. True when right."""
    def make(H, N):
        if layout == "bnhd":
            return torch.randn(B, N, H, d, device="cuda", dtype=dtype).transpose(1, 2)
        return torch.randn(B, H, N, d + 1, device="cuda", dtype=dtype)[..., 1:]
    q, k, v = make(Hq, Nq), make(Hkv, Nk), make(Hkv, Nk)
    kw = dict(variants)
    if kw.pop("sinks", False):
        kw["sinks"] = torch.randn(Hq, device="cuda")
    if kw.pop("alibi", False):
        kw["alibi_slopes"] = torch.rand(Hq, device="cuda") * 0.2
    if kw.pop("key_mask", False):
        kw["key_mask"] = torch.rand(B, Nk, device="cuda") < 0.7
    d_out, d_lse = torch.randn(B, Hq, Nq, d, device="cuda", dtype=dtype), torch.randn(B, Hq, Nq, device="cuda")

    def grads(q, k, v, kw, d_out, d_lse):
        leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
        out, lse = torch_flashattn.attention_lse(*leaves, **kw)
        return torch.autograd.grad((out.float() * d_out.float()).sum() + (lse * d_lse).sum(), leaves)

    before = torch_flashattn.stats()["exact"]
    ours = grads(q, k, v, kw, d_out, d_lse)
    torch.cuda.synchronize()
    ran = torch_flashattn.stats()["exact"] == before
    def cpu(t):
        return t if not isinstance(t, torch.Tensor) else t.float().cpu() if t.is_floating_point() else t.cpu()
    ref = grads(*(cpu(t) for t in (q, k, v)), {n: cpu(x) for n, x in kw.items()}, cpu(d_out), cpu(d_lse))
    err = grad_error(ours, ref)
    ok = ran and err < 3e-2                                     # NaN fails
    print(f"{'ok  ' if ok else 'FAIL'} backward {dtype} {layout} {(B, Hq, Hkv, Nq, Nk, d)} {variants}: "
          f"max rel err {err:.1e}{'' if ran else ' (left the kernel)'}")
    return ok


def grad_error(ours, ref):
    """The largest of the gradients' max errors, each relative to its reference's largest entry; NaN
    when any is (so that a comparison with a bound fails)."""
    errs = [((a.float().cpu() - r).abs().max() / r.abs().max().clamp_min(1e-6)).item() for a, r in zip(ours, ref)]
    return float("nan") if any(e != e for e in errs) else max(errs)


def check_backward_varlen(d, bad=False):
    """Packed sequences in the backward kernel (check_varlen's lengths and variants, the loss using lse
    too) against the CPU backend's gradients; bad: cu_seqlens that decrease, every gradient NaN."""
    cq, ck, q, k, v = packed_inputs(d, bad)
    kw = dict(causal=True, causal_align="bottom_right", window=(100, -1), softcap=20.0, sinks=torch.randn(4),
              alibi_slopes=torch.rand(4) * 0.1)
    d_out, d_lse = torch.randn(q.shape, device="cuda", dtype=torch.bfloat16), torch.randn(4, q.shape[0], device="cuda")

    def grads(q, k, v, cq, ck, kw, d_out, d_lse):
        leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
        out, lse = torch_flashattn.attention_varlen(*leaves, cq, ck, 300, 250, return_lse=True, **kw)
        return torch.autograd.grad((out.float() * d_out.float()).sum() + (lse * d_lse).sum(), leaves)

    before = torch_flashattn.stats()["exact"]
    dev = {n: x.cuda() if isinstance(x, torch.Tensor) else x for n, x in kw.items()}
    ours = grads(q, k, v, cq.cuda(), ck.cuda(), dev, d_out, d_lse)
    torch.cuda.synchronize()
    ran = torch_flashattn.stats()["exact"] == before
    if bad:
        ok = ran and all(bool(t.isnan().all()) for t in ours)
        err = float("nan")
    else:
        cpu = lambda t: t.float().cpu()  # noqa: E731
        ref = grads(cpu(q), cpu(k), cpu(v), cq, ck, kw, cpu(d_out), cpu(d_lse))
        err = grad_error(ours, ref)
        ok = ran and err < 3e-2                                 # NaN fails
    print(f"{'ok  ' if ok else 'FAIL'} backward varlen d={d}{' bad cu_seqlens -> NaN' if bad else ''}: "
          f"max rel err {err:.1e}{'' if ran else ' (left the kernel)'}")
    return ok


def main():
    torch.manual_seed(0)
    failures = 0
    # SANITIZE_ONLY=kvcache / sm90 / sm80 / variants / turing / backward / decode_step / extra / counter: the
    # decode cases, the Hopper kernel's, the sm_80 kernel's plain cases, the variants', the Turing kernel's,
    # the backward kernel's, the padded decoding step's, the Hopper kernel's sinks alone and ALiBi alone or
    # its unpacked calls on the packed walk (a quicker run after a change to decode.cu, sm90.cu, sm80.cu,
    # variants.cuh, turing.cu or sm80_backward.cu)
    only = os.environ.get("SANITIZE_ONLY")
    families = {f: t for f, t in FAMILIES.items() if only not in ("sm90", "sm80", "turing") or f == only}
    for family, dtypes in ({} if only in ("kvcache", "variants", "backward", "decode_step", "extra", "counter")
                           else families).items():
        set_overrides(family=family)
        for dtype in dtypes:
            for case in CASES:
                if family == "fp32tc" and case[5] > 128:   # declined: auto runs fp32 there
                    continue
                failures += not check_forward(family, dtype, *case)
            if family in ("sm90", "sm80", "turing"):
                for d, causal in ((64, False), (128, True), (256, False)):
                    failures += not check_huge_scores(family, dtype, d, causal)
    if only in (None, "turing"):
        # A compute capability 7.5 GPU's choices (fa_overrides.device_cc): Turing's kernel for
        # fp16, the CUDA-core one for the rest, with V in K's buffer at d = 256 (64 KB).
        set_overrides(family="auto", device_cc=75)
        for dtype in (torch.float16, torch.bfloat16, torch.float32):
            for case in CASES:
                failures += not check_forward("auto", dtype, *case, " as compute capability 7.5")
        set_overrides(family="auto")
    if only == "turing":
        return 1 if failures else 0
    if only in (None, "backward"):
        set_overrides(family="auto")
        for dtype in (torch.float16, torch.bfloat16):
            for case in BACKWARD_CASES:
                for layout in ("bnhd", "misaligned"):
                    failures += not check_backward(dtype, *case, layout)
        for d in (64, 128):
            failures += not check_backward_varlen(d)
        failures += not check_backward_varlen(64, bad=True)
        if only == "backward":
            return 1 if failures else 0
    if "sm90" in FAMILIES and only in (None, "sm90"):
        # Persistent CTAs walking several tiles each (336 tiles): the K/V ring and the Q buffers
        # running on from tile to tile. Non-causal, on 132 SMs, the last round's 72 tiles are
        # split along the keys on the d = 128 three-consumer tile (2049 keys; 3 and 4 parts forced)
        # and merged (fa_sm90_merge_kernel).
        set_overrides(family="sm90", sm90_grid="persistent")
        for causal in (False, True):
            failures += not check_forward("sm90", torch.bfloat16, 3, 16, 4, 777, 1025, 128, causal, " persistent")
        # Causal tiles taken in pairs (a head's heaviest with its lightest); 7 query tiles a head.
        set_overrides(family="sm90", sm90_grid="pairs")
        failures += not check_forward("sm90", torch.bfloat16, 3, 16, 4, 777, 1025, 128, True, " pairs")
        for parts in (3, 4):
            set_overrides(family="sm90", sm90_grid="persistent", sm90_tail=parts, sm90_long_tile="on")
            failures += not check_forward("sm90", torch.bfloat16, 3, 16, 4, 777, 2049, 128, False,
                                          f" last round in {parts} parts")
        # d = 128 non-causal on the 3-consumer tile: query and key tails, both grids.
        for grid in ("persistent", "tile"):
            set_overrides(family="sm90", sm90_grid=grid, sm90_long_tile="on")
            failures += not check_forward("sm90", torch.bfloat16, 1, 4, 2, 385, 2049, 128, False, " long keys")
        # d = 128 causal from 4k keys: the fenced 2-consumer tile, a query tail, both grids.
        for grid in ("persistent", "tile", "pairs"):
            set_overrides(family="sm90", sm90_grid=grid)
            failures += not check_forward("sm90", torch.bfloat16, 1, 2, 1, 4100, 4100, 128, True, " long causal")
    if "sm90" in FAMILIES and only in (None, "sm90", "variants", "extra"):
        # Sinks alone (the plain tiles' SINK kernels) and ALiBi alone: every tile width, both grids,
        # and the persistent grid's last round split in 3 parts and merged.
        for what in ("sinks", "alibi"):
            for grid in ("persistent", "tile"):
                set_overrides(family="sm90", sm90_grid=grid)
                for d in (64, 128, 256):
                    for causal in (False, True):
                        failures += not check_plain_extra(what, 2, 4, 2, 333, 517, d, causal, " " + grid)
            set_overrides(family="sm90", sm90_grid="persistent", sm90_tail=3, sm90_long_tile="on")
            failures += not check_plain_extra(what, 3, 16, 4, 777, 2049, 128, False, " last round in 3 parts")
    if "sm90" in FAMILIES and only in (None, "sm90", "variants"):
        # The variants in the Hopper kernel (VAR): windows that skip key blocks, bottom-right rows
        # that see nothing, key_mask and a strided float attn_mask read per element, sinks,
        # softcap and ALiBi, at each tile width; both grids.
        for grid in ("persistent", "tile"):
            set_overrides(family="sm90", sm90_grid=grid)
            for d in (64, 128, 256):
                failures += not check_variants(torch.bfloat16, 2, 4, 2, 333, 517, d, grid)
                failures += not check_variants(torch.bfloat16, 3, 2, 1, 200, 517, d, grid + " padded key_mask",
                                               key_mask=padded_key_mask(3, 517))
                failures += not check_variants(torch.bfloat16, 2, 4, 2, 333, 517, d, grid + " aligned attn_mask",
                                               attn_mask="aligned")
    if "sm90" in FAMILIES and only in (None, "sm90", "variants", "counter"):
        # Unpacked calls on the packed walk, tiles from a counter (sm90_grid "counter"): no masks.
        set_overrides(family="sm90", sm90_grid="counter")
        for d in (64, 128, 256):
            failures += not check_variants(torch.bfloat16, 3, 8, 2, 333, 517, d, "counter", key_mask=False,
                                           attn_mask=False)
    if only in (None, "sm90", "variants"):
        # The variants in the sm_80 kernel (VAR), and packed sequences in both kernels: rows that
        # end inside the next sequence's tile, and bad cu_seqlens (the NaN fill).
        for family in ("sm90", "sm80") if "sm90" in FAMILIES else ("sm80",):
            set_overrides(family=family)
            for d in (64, 128, 256):
                if family == "sm80":
                    failures += not check_variants(torch.float16, 2, 4, 2, 333, 517, d, "", family="sm80")
                    failures += not check_variants(torch.float16, 3, 2, 1, 200, 517, d, "padded key_mask",
                                                   family="sm80", key_mask=padded_key_mask(3, 517))
                failures += not check_varlen(family, d)
            failures += not check_varlen(family, 128, bad=True)
        if "sm90" in FAMILIES:
            # Packed sequences on the Hopper kernel's static walks too (above: the counter's).
            for grid in ("persistent", "tile"):
                set_overrides(family="sm90", sm90_grid=grid)
                failures += not check_varlen("sm90", 128)
    if only in (None, "kvcache", "variants", "decode_step"):
        # A padded batch's decoding step (attention with key_mask, 1 or 4 queries of a group of 4) on
        # the split-KV kernel: key_mask a view at an odd byte offset, read one block ahead; the
        # rule's splits, then one split and 5 combined.
        for plan in ({}, dict(decode_splits=1), dict(decode_splits=5, decode_cluster="off")):
            set_overrides(family="auto", **plan)
            for d in (64, 128, 256):
                for nq in (1, 4):
                    km = padded_key_mask(3, 1300 + 3)[:, 3:]
                    failures += not check_variants(torch.bfloat16, 3, 8, 2, nq, 1300, d, f"decode step {plan}",
                                                   family="auto", key_mask=km, attn_mask=False)
        set_overrides(family="auto")
    # The split rule's own plans, then 5 and 20 splits merged by each combine kernel (no clusters).
    merges = (("auto", "rule"), ("simt", "rule"), ("auto", "elem"), ("auto", "wide"))
    for family, merge in () if only in ("sm90", "sm80", "variants", "decode_step", "extra", "counter") else merges:
        set_overrides(family=family)
        if merge != "rule":
            set_overrides(family=family, decode_splits=5 if merge == "elem" else 20, decode_cluster="off",
                          decode_combine=merge)
        for dtype in (torch.float32, torch.bfloat16):
            for B, Hq, Hkv, Nq, Nmax, d, causal, seqlens, nnew, misaligned in KVCACHE_CASES:
                def cache():
                    t = torch.randn(B, Hkv, Nmax, d + misaligned, device="cuda", dtype=dtype)
                    return t[..., misaligned:]
                q = torch.randn(B, Nq, Hq, d, device="cuda", dtype=dtype).transpose(1, 2)
                k_cache, v_cache = cache(), cache()
                new = [torch.randn(B, Hkv, nnew, d, device="cuda", dtype=dtype) if nnew else None for _ in range(2)]
                sl = torch.tensor(seqlens, dtype=torch.int32, device="cuda")
                cpu = [t.float().cpu() if t is not None else None for t in (q, k_cache, v_cache, sl, *new)]
                cpu[3] = sl.cpu()
                out = torch.ops.fa.forward_kvcache(q, k_cache, v_cache, sl, *new, None, causal)
                torch.cuda.synchronize()
                ref = torch.ops.fa.forward_kvcache(*cpu, None, causal)
                err = (out.float().cpu() - ref).abs().max().item()
                cache_ok = torch.equal(k_cache.float().cpu(), cpu[1]) and torch.equal(v_cache.float().cpu(), cpu[2])
                ok = cache_ok and err < (1e-5 if dtype == torch.float32 else 2e-2)
                failures += not ok
                print(f"{'ok  ' if ok else 'FAIL'} kvcache {family:5} {merge:7} {str(dtype):14} B={B} Hq={Hq} "
                      f"Hkv={Hkv} Nq={Nq} Nmax={Nmax} d={d} causal={causal} Nnew={nnew}: max err {err:.1e}, "
                      f"caches {'ok' if cache_ok else 'WRONG'}")
                if dtype == torch.bfloat16 and family == "auto" and all(0 <= n + nnew <= Nmax for n in seqlens):
                    # The variants on the same (appended) caches, against the CPU backend.
                    kw = dict(window=(40, -1), softcap=20.0, alibi_slopes=torch.rand(Hq, device="cuda") * 0.05,
                              sinks=torch.randn(Hq, device="cuda"))
                    sl2 = sl + nnew
                    out = torch_flashattn.attention_kvcache(q, k_cache, v_cache, cache_seqlens=sl2, causal=causal,
                                                            **kw)
                    torch.cuda.synchronize()
                    ref = torch_flashattn.attention_kvcache(
                        q.float().cpu(), k_cache.float().cpu(), v_cache.float().cpu(), cache_seqlens=sl2.cpu(),
                        causal=causal, **{n: x.cpu() if isinstance(x, torch.Tensor) else x for n, x in kw.items()})
                    err = (out.float().cpu() - ref).abs().max().item()
                    ok = err < 2e-2
                    failures += not ok
                    print(f"{'ok  ' if ok else 'FAIL'} kvcache variants {merge:7} B={B} Hq={Hq} Hkv={Hkv} Nq={Nq} "
                          f"Nmax={Nmax} d={d} causal={causal}: max err {err:.1e}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
