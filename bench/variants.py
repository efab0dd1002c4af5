# Attention variants benchmark (H200): torch_flashattn.attention with a variant against the same
# call on the exact path (what such calls ran before the kernel took them), our dense kernel on the
# same tensors, SDPA given the variant as a dense attn_mask where one expresses it (cuDNN and
# efficient backends, by name), and FlashAttention-3 (window, softcap, packed sequences; bf16) and
# FlashAttention-4's CuTe kernels (window, softcap, sinks, packed sequences) where importable.
# TFLOP/s count the visible query-key pairs only: 4 · d · pairs / time.
# Packed sequences (varlen): `fa dense` is our dense kernel on the same sequences padded to the
# longest. --family sm80 forces the sm_80 kernel for our calls (what an A100 runs). Timing: the
# providers of a point call by call in turn, the order rotating every round, L2 flushed before each
# call (bench.attention.time_interleaved), so that the card's clock and power drift fall on all of
# them alike; the exact path on its own (do_bench). Writes <out>.json and <out>.md (the table, also
# printed); default bench/out/variants.
#
#   python3 -m bench.variants                               # bf16, d = 128, H = 16
#   python3 -m bench.variants --out bench/results/variants  # the committed table
import argparse
import json
import math
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

import torch_flashattn
from torch_flashattn._testing import exact_path

from bench.attention import require_cuda, environment, git_commit, time_interleaved

REPO = Path(__file__).resolve().parent.parent


def point(name, B, Nq, Nk, causal=False, align="top_left", window=(-1, -1), softcap=None, alibi=False,
          sinks=False, valid=None, bias=False, varlen=False):
    return dict(name=name, B=B, Nq=Nq, Nk=Nk, causal=causal, align=align, window=window, softcap=softcap,
                alibi=alibi, sinks=sinks, valid=valid, bias=bias, varlen=varlen)


# B · Nk = 16k keys per head (a padded batch: 32k), H = 16, d = 128.
POINTS = [
    point("sliding (256, 0), 4k", 4, 4096, 4096, causal=True, window=(256, -1)),
    point("sliding (1024, 0), 4k", 4, 4096, 4096, causal=True, window=(1024, -1)),
    point("sliding (1024, 0), 16k", 1, 16384, 16384, causal=True, window=(1024, -1)),
    point("sliding (4096, 0), 16k", 1, 16384, 16384, causal=True, window=(4096, -1)),
    point("softcap 30, 4k", 4, 4096, 4096, softcap=30.0),
    point("softcap 30 causal, 4k", 4, 4096, 4096, causal=True, softcap=30.0),
    point("ALiBi causal, 4k", 4, 4096, 4096, causal=True, alibi=True),
    point("sinks causal, 4k", 4, 4096, 4096, causal=True, sinks=True),
    point("bottom-right causal 1k over 4k", 4, 1024, 4096, causal=True, align="bottom_right"),
    point("padded batch 8 × 4k (40-100 %)", 8, 4096, 4096, valid=(0.4, 1.0)),
    point("T5 bias (1, H, N, N), 2k", 8, 2048, 2048, bias=True),
    point("T5 bias (1, H, N, N), 4k", 4, 4096, 4096, bias=True),
    point("T5 bias (1, H, N, N) causal, 2k", 8, 2048, 2048, causal=True, bias=True),
    # packed: 8 sequences of 1k..4k tokens (valid: their share of the longest), q and k alike
    point("varlen 8 × 1k–4k", 8, 4096, 4096, valid=(0.25, 1.0), varlen=True),
    point("varlen 8 × 1k–4k causal", 8, 4096, 4096, causal=True, valid=(0.25, 1.0), varlen=True),
]


def make(p, H, d, dtype):
    g = torch.Generator(device="cuda").manual_seed(0)
    B, Nq, Nk = p["B"], p["Nq"], p["Nk"]
    q = torch.randn(B, H, Nq, d, device="cuda", dtype=dtype, generator=g)
    k = torch.randn(B, H, Nk, d, device="cuda", dtype=dtype, generator=g)
    v = torch.randn(B, H, Nk, d, device="cuda", dtype=dtype, generator=g)
    kw = dict(causal=p["causal"], causal_align=p["align"], window=p["window"], softcap=p["softcap"])
    lengths = None
    if p["alibi"]:
        kw["alibi_slopes"] = torch.tensor([2 ** (-8 * (h + 1) / H) for h in range(H)], device="cuda")
    if p["sinks"]:
        kw["sinks"] = torch.randn(H, device="cuda", generator=g)
    if p["valid"]:
        lo, hi = p["valid"]
        lengths = [int(Nk * (lo + (hi - lo) * b / max(B - 1, 1))) for b in range(B)]
        if not p["varlen"]:
            kw["key_mask"] = torch.arange(Nk, device="cuda")[None, :] < torch.tensor(lengths, device="cuda")[:, None]
    if p["bias"]:
        kw["attn_mask"] = torch.randn(1, H, Nq, Nk, device="cuda", dtype=dtype, generator=g)
    return q, k, v, kw, lengths


def packed(p, q, k, v, lengths):
    """The padded batch's sequences packed: (q, k, v) as (total, H, d), cu_seqlens, max_seqlen."""
    cu = torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    pack = lambda x: torch.cat([x[b, :, :n].transpose(0, 1) for b, n in enumerate(lengths)])  # noqa: E731
    return pack(q), pack(k), pack(v), cu, max(lengths)


def dense_mask(p, kw, H):
    """The variant as SDPA's attn_mask (None where none expresses it: softcap, sinks, packed)."""
    if p["softcap"] or p["sinks"] or p["varlen"]:
        return None
    Nq, Nk = p["Nq"], p["Nk"]
    i = torch.arange(Nq, device="cuda")[:, None] + (Nk - Nq if p["align"] == "bottom_right" else 0)
    j = torch.arange(Nk, device="cuda")[None, :]
    left, right = p["window"]
    right = 0 if p["causal"] else right
    vis = torch.ones(Nq, Nk, dtype=torch.bool, device="cuda")
    if left >= 0:
        vis &= j >= i - left
    if right >= 0:
        vis &= j <= i + right
    if "key_mask" in kw:
        vis = vis & kw["key_mask"][:, None, None, :]
    if p["alibi"]:
        bias = -kw["alibi_slopes"].view(1, H, 1, 1) * (i - j).abs().float()
        return bias.masked_fill(~vis, float("-inf")).to(torch.bfloat16)
    if "attn_mask" in kw:                             # a bias, with the point's visibility as −inf
        m = kw["attn_mask"]
        return m if bool(vis.all()) else m.masked_fill(~vis, float("-inf"))
    return vis


def visible_pairs(p, lengths):
    """Query-key pairs that take part, per (batch, head), summed over the batch."""
    Nq, Nk = p["Nq"], p["Nk"]
    left, right = p["window"]
    right = 0 if p["causal"] else right
    if p["varlen"]:
        return sum(visible_pairs(dict(p, B=1, Nq=n, Nk=n, varlen=False), None) for n in lengths)
    i = torch.arange(Nq, dtype=torch.int64) + (Nk - Nq if p["align"] == "bottom_right" else 0)
    lo = (i - left).clamp(min=0) if left >= 0 else torch.zeros_like(i)
    total = 0
    for b in range(p["B"]):
        n = lengths[b] if lengths else Nk
        hi = (i + right).clamp(max=n - 1) if right >= 0 else torch.full_like(i, n - 1)
        total += (hi - lo + 1).clamp(min=0).sum().item()
    return total


def fa3_call(p, q, k, v):
    """FlashAttention-3's forward for the variants it takes (bf16; window, softcap, bottom-right
    causal), or None."""
    if p["alibi"] or p["sinks"] or (p["valid"] and not p["varlen"]) or p["bias"]:
        return None
    try:
        from fa3_fwd_interface import flash_attn_func, flash_attn_varlen_func
    except ImportError:
        return None
    if p["varlen"]:                                   # q: packed(...)
        qp, kp, vp, cu, n = q
        if qp.dtype != torch.bfloat16:
            return None
        return lambda: flash_attn_varlen_func(qp, kp, vp, cu, cu, n, n, causal=p["causal"])
    if q.dtype != torch.bfloat16:
        return None
    qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    left, right = p["window"]
    if p["align"] == "top_left" and p["Nq"] != p["Nk"]:
        return None                                   # FA3's causal and window are bottom-right
    kw = dict(causal=p["causal"], window_size=(left, 0 if p["causal"] else right))
    if p["softcap"]:
        kw["softcap"] = p["softcap"]
    if p["causal"] and left >= 0:                     # a causal sliding window as a local window
        kw.update(causal=False, window_size=(left, 0))
    return lambda: flash_attn_func(qt, kt, vt, **kw)


def fa4_call(p, q, k, v, kw):
    """FlashAttention-4's CuTe forward (its Hopper kernel here) for the variants it takes (window,
    softcap, sinks, bottom-right causal, packed sequences; fp16 and bf16), or None."""
    if p["alibi"] or (p["valid"] and not p["varlen"]) or p["bias"]:
        return None
    try:
        from flash_attn.cute.interface import flash_attn_func, flash_attn_varlen_func
    except ImportError:
        return None
    sink = {"learnable_sink": kw["sinks"]} if p["sinks"] else {}
    if p["varlen"]:                                   # q: packed(...)
        qp, kp, vp, cu, n = q
        return lambda: flash_attn_varlen_func(qp, kp, vp, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=n,
                                              max_seqlen_k=n, causal=p["causal"], **sink)
    left, right = p["window"]
    if p["align"] == "top_left" and p["Nq"] != p["Nk"]:
        return None                                   # FA4's causal and window are bottom-right
    qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    extra = dict(sink, softcap=p["softcap"] or 0.0)
    if left >= 0 or right >= 0:
        extra["window_size"] = (left if left >= 0 else None, 0 if p["causal"] else (right if right >= 0 else None))
        return lambda: flash_attn_func(qt, kt, vt, causal=False, **extra)
    return lambda: flash_attn_func(qt, kt, vt, causal=p["causal"], **extra)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(REPO / "bench/out/variants"))
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--H", type=int, default=16)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--budget", type=float, default=0.5, help="seconds of timed calls per provider and point")
    ap.add_argument("--only", nargs="*", help="point names containing these words")
    ap.add_argument("--family", default="auto", choices=["auto", "sm80"], help="our kernel family, forced")
    ap.add_argument("--render", metavar="JSON", help="print the table of an earlier run's JSON and stop")
    args = ap.parse_args(argv)
    if args.render:
        return print(render(json.loads(Path(args.render).read_text())), end="")
    require_cuda("bench.variants", "(--render JSON needs none)")
    from torch_flashattn._testing import overrides
    from triton.testing import do_bench
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    H, d = args.H, args.d
    rows = []
    for p in POINTS:
        if args.only and not any(w in p["name"] for w in args.only):
            continue
        q, k, v, kw, lengths = make(p, H, d, dtype)
        flops = 4.0 * d * H * visible_pairs(p, lengths)
        pk = packed(p, q, k, v, lengths) if p["varlen"] else None
        if pk:
            ours = lambda: torch_flashattn.attention_varlen(pk[0], pk[1], pk[2], pk[3], pk[3], pk[4], pk[4],  # noqa: E731
                                                            causal=p["causal"])
        else:
            ours = lambda: torch_flashattn.attention(q, k, v, **kw)  # noqa: E731
        with overrides(family=args.family):
            out = ours()
        with exact_path():
            err = (out.float() - ours().float()).abs().max().item()
        dense_causal = p["causal"] and p["align"] == "top_left"
        calls = {"fa": ours, "fa dense": lambda: torch_flashattn.attention(q, k, v, causal=dense_causal)}
        mask = dense_mask(p, kw, H)
        if mask is not None:
            for name, b in (("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION),
                            ("sdpa-efficient", SDPBackend.EFFICIENT_ATTENTION)):
                def run(b=b):
                    with sdpa_kernel(b):
                        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                calls[name] = run
        f3 = fa3_call(p, pk if pk else q, k, v)
        if f3 is not None:
            calls["fa3"] = f3
        f4 = fa4_call(p, pk if pk else q, k, v, kw)
        if f4 is not None:
            calls["fa4"] = f4
        times, ready = {}, {}
        with overrides(family=args.family):     # ours forced; the peers and SDPA do not read it
            for name, fn in calls.items():
                try:
                    fn()
                    torch.cuda.synchronize()
                    ready[name] = fn
                except Exception as e:  # a backend that refuses the point
                    times[name] = f"n/a: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
            times.update(zip(ready, time_interleaved(list(ready.values()), args.budget)))
        with exact_path():
            times["fa exact path"] = do_bench(ours, warmup=5, rep=100, return_mode="median")
        row = dict(point=p["name"], tflops={n: flops / t / 1e9 for n, t in times.items() if isinstance(t, float)},
                   ms={n: t for n, t in times.items()}, max_err_vs_exact=err)
        peers = [n for n in row["tflops"] if n not in ("fa", "fa dense", "fa exact path")]
        row["vs_best_peer"] = (row["tflops"]["fa"] / max(row["tflops"][n] for n in peers)) if peers else None
        rows.append(row)
        print(json.dumps(row), flush=True)
        del q, k, v, kw, mask, pk
        torch.cuda.empty_cache()
    result = dict(environment=environment("cuda"), commit=git_commit(), dtype=args.dtype, H=H, d=d,
                  family=args.family, rows=rows)
    text = render(result)
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    out.with_suffix(".md").write_text(text)


def render(result):
    """The markdown table of a run's JSON (main's result; --render JSON prints it again)."""
    names = ["fa", "fa dense", "fa exact path", "fa3", "fa4", "sdpa-cudnn", "sdpa-efficient"]
    fam = "" if result["family"] == "auto" else f", our calls on the {result['family']} kernel (forced)"
    gpu = result["environment"].get("device", "GPU").removeprefix("NVIDIA ")
    md = [f"Variants, {result['dtype']}, d = {result['d']}, H = {result['H']}, {gpu}{fam}; TFLOP/s over the visible "
          f"query-key pairs of each point ({result['commit']}); the providers of a point timed call by call in turn. "
          "`fa dense`: our kernel on the same tensors without the variant (its time over the variant's pairs); "
          "`fa exact path`: the same call computed through PyTorch, as CUDA ran these before; "
          "SDPA backends get the variant as a dense attn_mask where one expresses it.", "",
          "| point | " + " | ".join(names) + " | fa / best peer |", "|" + " --- |" * (len(names) + 2)]
    for r in result["rows"]:
        cells = [f"{r['tflops'][n]:.0f}" if n in r["tflops"] else "n/a" for n in names]
        ratio = f"{r['vs_best_peer']:.2f}×" if r["vs_best_peer"] else "–"
        md.append(f"| {r['point']} | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(md) + "\n"

if __name__ == "__main__":
    main()
