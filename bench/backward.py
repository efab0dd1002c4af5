# Backward-pass benchmark (CUDA): the gradients of attention through autograd, ours against SDPA's
# flash (FlashAttention-2), cuDNN and efficient backends, and FlashAttention-4 where importable, in
# one call, over FlashAttention's grid (B·N = 16384 tokens, H·d = 2048). Each provider's forward runs
# once outside the timing; the timed call is torch.autograd.grad of its output (retain_graph), L2
# flushed before each call and the providers interleaved (bench.attention.time_interleaved). TFLOP/s
# count the backward's five matrix products: 10 · B · H · N² · d, halved when causal. Before timing,
# each point checks our gradients against SDPA's in the same dtype (max |difference| / max |SDPA's
# gradient|, recorded). Ours: "fa" (the automatic choice: on the H200 the Hopper kernel) and "fa-sm80"
# (the sm_80 kernel forced, beside it); --family sm80 forces our sm_80 kernels (what an A100 runs) for
# "fa" and drops "fa-sm80". Writes <out>.json
# and <out>.md (the table, also printed); default bench/out/backward.
#
#   python3 -m bench.backward                                  # bf16, d 64 and 128, N 512..16k
#   python3 -m bench.backward --out bench/results/backward     # the committed table
#   python3 -m bench.backward --render bench/results/backward.json   # its .md again from the JSON
#   python3 -m bench.backward --variants --out bench/results/backward_variants
#   python3 -m bench.backward --with-forward --out bench/results/backward_fwdbwd
#
# --with-forward: the timed call is the forward and its backward (TFLOP/s over 14 · B · H · N² · d,
# halved when causal), with the SDPA drop-in (torch_flashattn.scaled_dot_product_attention) as a
# provider beside ours ("dropin") and SDPA with the backend it picks itself ("sdpa-default").
#
# --variants: our backward with each variant against our own plain backward at the same shape, in
# one call (softcap, ALiBi, sinks, key_mask with 25 % of the keys padded, a window of 1024, packed
# sequences of 1/2, 1/4, 1/8, 1/8 of the tokens), SDPA's flash backward on the plain problem beside
# them; TFLOP/s over the pairs each variant leaves visible.
import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_flashattn
from torch_flashattn._testing import overrides

from bench.attention import require_cuda, environment, git_commit, time_interleaved

REPO = Path(__file__).resolve().parent.parent
SDPA = {"sdpa-flash": SDPBackend.FLASH_ATTENTION, "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
        "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION}


def fa4_forward():
    """FlashAttention-4's CuTe interface (its Hopper backward is flash_bwd_sm90.py) when importable
    (../shared/peers/peers.sh stages it on the H200), else None."""
    try:
        from flash_attn.cute.interface import flash_attn_func
    except ImportError:
        return None
    return flash_attn_func


def forward_fn(name, causal, family):
    if name == "fa4":
        f4 = fa4_forward()

        def run(q, k, v):     # FA4 takes (B, N, H, d); its causal is bottom-right, the same here (Nq = Nk)
            out = f4(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=bool(causal))
            return (out[0] if isinstance(out, tuple) else out).transpose(1, 2)
        return run
    if name == "sdpa-default":        # the backend SDPA picks by itself
        def run(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
        return run
    if name == "dropin":
        def run(q, k, v):
            return torch_flashattn.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
        return run
    if name in ("fa", "fa-sm80"):
        def run(q, k, v):
            with overrides(family="sm80" if name == "fa-sm80" else family):
                return torch_flashattn.attention(q, k, v, causal=bool(causal))
        return run

    def run(q, k, v):
        with sdpa_kernel(SDPA[name]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    return run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(REPO / "bench/out/backward"))
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--d", type=int, nargs="*", default=[64, 128])
    ap.add_argument("--n", type=int, nargs="*", default=[512, 1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--causal", type=int, nargs="*", default=[0, 1])
    ap.add_argument("--budget", type=float, default=0.3, help="seconds of timed calls per provider and point")
    ap.add_argument("--family", default="auto", choices=["auto", "sm80"], help="our kernel family, forced")
    ap.add_argument("--render", metavar="JSON", help="only rewrite JSON's .md from it")
    ap.add_argument("--variants", action="store_true", help="each variant against our plain backward")
    ap.add_argument("--with-forward", action="store_true", help="time the forward and the backward together")
    args = ap.parse_args(argv)
    if args.render:
        return render(args.render)
    require_cuda("bench.backward", "(--render JSON needs none)")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    if args.variants:
        return write(args.out, variants_main(args, dtype))
    ours = ["fa"] + (["fa-sm80"] if args.family == "auto" else []) + (["dropin"] if args.with_forward else [])
    names = (ours + list(SDPA) + (["sdpa-default"] if args.with_forward else [])
             + (["fa4"] if fa4_forward() is not None else []))
    rows = []
    for d in args.d:
        for causal in args.causal:
            for n in args.n:
                B, H, g, q, k, v, dout = grid_point(d, n, dtype)
                flops = (14.0 if args.with_forward else 10.0) * B * H * n * n * d / (2 if causal else 1)
                calls, grads, notes = {}, {}, {}
                for name in names:
                    try:
                        fwd = forward_fn(name, causal, args.family)
                        out = fwd(q, k, v)
                        fam = "sm80" if name == "fa-sm80" else args.family
                        with overrides(family=fam):
                            grads[name] = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

                        def call(out=out, fam=fam, fwd=fwd):
                            with overrides(family=fam):
                                if args.with_forward:
                                    return torch.autograd.grad(fwd(q, k, v), (q, k, v), dout)
                                return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
                        calls[name] = call
                    except Exception as e:  # a backend that refuses the point
                        notes[name] = f"n/a: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
                before = torch_flashattn.stats()["exact"]
                ref = grads.get("sdpa-flash") or grads.get("sdpa-cudnn")
                err = {}
                if "fa" in grads and ref is not None:
                    err = {w: ((a.float() - r.float()).abs().max() / r.float().abs().max()).item()
                           for w, a, r in zip(("dq", "dk", "dv"), grads["fa"], ref)}
                ms = dict(zip(calls, time_interleaved(list(calls.values()), args.budget)))
                exact = torch_flashattn.stats()["exact"] - before
                row = dict(d=d, causal=causal, N=n, B=B, H=H, ms=ms, notes=notes, rel_err_vs_sdpa=err,
                           exact_calls_while_timed=exact,
                           tflops={w: flops / t / 1e9 for w, t in ms.items()})
                peers = [w for w in row["tflops"] if w not in ours]
                row["vs_best_peer"] = (row["tflops"]["fa"] / max(row["tflops"][w] for w in peers)
                                       if "fa" in row["tflops"] and peers else None)
                rows.append(row)
                print(json.dumps(row), flush=True)
                del q, k, v, dout, calls, grads, ref
                torch.cuda.empty_cache()
    write(args.out, dict(environment=environment("cuda"), commit=git_commit(), dtype=args.dtype, family=args.family,
                         with_forward=args.with_forward, rows=rows))


def write(out, result):
    """Prints the result's table and writes <out>.json and <out>.md."""
    text = markdown_variants(result) if result.get("variants") else markdown(result)
    print(text)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    out.with_suffix(".md").write_text(text)


def grid_point(d, n, dtype, device="cuda"):
    """FlashAttention's grid at head dim d and N = n: B·N = 16k tokens, H·d = 2048; (B, H, the
    generator, q, k, v needing gradients, dout)."""
    B, H = max(1, 16384 // n), 2048 // d
    g = torch.Generator(device=device).manual_seed(0)
    q, k, v = (torch.randn(B, H, n, d, device=device, dtype=dtype, generator=g).requires_grad_(True) for _ in range(3))
    dout = torch.randn(B, H, n, d, device=device, dtype=dtype, generator=g)
    return B, H, g, q, k, v, dout


def variant_cases(B, H, n, causal, g):
    """(name, keyword arguments of torch_flashattn.attention or None for varlen, visible pairs per head
    summed over the batch) of each timed variant."""
    full = B * (n * (n + 1) // 2 if causal else n * n)
    i = torch.arange(n, dtype=torch.float64)
    lo, hi = (i - 1024).clamp_min(0), (i if causal else (i + 1024).clamp_max(n - 1))
    window = B * int((hi - lo + 1).sum().item())
    kept = n - n // 4                                     # key_mask: the last quarter of each row padded
    masked = B * (int(torch.minimum(i + 1, torch.tensor(float(kept))).sum().item()) if causal else n * kept)
    lens = [B * n // 2, B * n // 4, B * n // 8, B * n - B * n // 2 - B * n // 4 - B * n // 8]
    packed = sum(m * (m + 1) // 2 if causal else m * m for m in lens)
    key_mask = torch.ones(B, n, dtype=torch.bool, device="cuda")
    key_mask[:, kept:] = False
    return [("plain", {}, full), ("softcap", dict(softcap=30.0), full),
            ("alibi", dict(alibi_slopes=torch.rand(H, device="cuda", generator=g) * 0.1), full),
            ("sinks", dict(sinks=torch.randn(H, device="cuda", generator=g)), full),
            ("key_mask", dict(key_mask=key_mask), masked),
            ("window", dict(window=(1024, -1 if causal else 1024)), window),
            ("varlen", lens, packed)]


def variants_main(args, dtype):
    """--variants: our backward per variant against our plain one and SDPA flash, one call."""
    rows = []
    for d in args.d:
        for causal in args.causal:
            for n in args.n:
                B, H, g, q, k, v, dout = grid_point(d, n, dtype)
                names, calls, pairs = [], [], {}
                with sdpa_kernel(SDPA["sdpa-flash"]):
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                names.append("sdpa-flash")
                calls.append(lambda out=out: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
                pairs["sdpa-flash"] = B * (n * (n + 1) // 2 if causal else n * n)
                for name, kw, vis in variant_cases(B, H, n, causal, g):
                    if name == "varlen":
                        cu = torch.tensor([0] + torch.tensor(kw).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
                        pq, pk, pv = (t.detach().transpose(1, 2).reshape(B * n, H, d).requires_grad_(True)
                                      for t in (q, k, v))
                        out = torch_flashattn.attention_varlen(pq, pk, pv, cu, cu, max(kw), max(kw),
                                                               causal=bool(causal))
                        dpo = dout.transpose(1, 2).reshape(B * n, H, d)
                        call = (lambda out=out, leaves=(pq, pk, pv), dpo=dpo:
                                torch.autograd.grad(out, leaves, dpo, retain_graph=True))
                    else:
                        out = torch_flashattn.attention(q, k, v, causal=bool(causal), **kw)
                        def call(out=out):
                            return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
                    names.append(name)
                    calls.append(call)
                    pairs[name] = vis
                before = torch_flashattn.stats()["exact"]
                ms = dict(zip(names, time_interleaved(calls, args.budget)))
                exact = torch_flashattn.stats()["exact"] - before
                row = dict(d=d, causal=causal, N=n, B=B, H=H, ms=ms, exact_calls_while_timed=exact,
                           tflops={w: 10.0 * H * d * pairs[w] / t / 1e9 for w, t in ms.items()})
                rows.append(row)
                print(json.dumps(row), flush=True)
                del q, k, v, dout, calls
                torch.cuda.empty_cache()
    return dict(environment=environment("cuda"), commit=git_commit(), dtype=args.dtype, family=args.family,
                variants=True, rows=rows)


def markdown_variants(result):
    names = [w for w in result["rows"][0]["tflops"] if w not in ("sdpa-flash",)]
    ratios = [w for w in names if w not in ("plain", "varlen")]
    md = [f"Backward pass with variants, {result['dtype']}, {result['environment'].get('device', 'CUDA')}: TFLOP/s "
          f"of torch.autograd.grad over the visible pairs (10·H·d per pair), B·N = 16k, H·d = 2048; each variant "
          f"against our plain backward at the same shape ({result['commit']}). varlen is the same problem at "
          f"every N (four packed sequences of 1/2, 1/4, 1/8 and 1/8 of the 16k tokens), not the plain shape, "
          f"so it has no ratio.", "",
          "| d | causal | N | sdpa-flash | " + " | ".join(names) + " | "
          + " | ".join(f"{w} / plain" for w in ratios) + " |",
          "|" + " --- |" * (4 + len(names) + len(ratios))]
    for r in result["rows"]:
        t = r["tflops"]
        md.append(f"| {r['d']} | {'yes' if r['causal'] else 'no'} | {r['N']} | {t['sdpa-flash']:.0f} | "
                  + " | ".join(f"{t[w]:.0f}" for w in names) + " | "
                  + " | ".join(f"{t[w] / t['plain']:.2f}×" for w in ratios) + " |")
    return "\n".join(md) + "\n"


def markdown(result):
    """The table of one result: TFLOP/s per provider, ours against the best peer and against
    SDPA's flash backend (FlashAttention-2)."""
    extra = [w for w in ("fa-sm80", "dropin") if any(w in r["tflops"] for r in result["rows"])]
    names = (["fa"] + extra + list(SDPA) + [w for w in ("sdpa-default", "fa4") if any(w in r["tflops"] for r in result["rows"])])
    fam = "" if result["family"] == "auto" else f", ours on the {result['family']} kernels (forced)"
    what = ("Forward + backward", "the forward and torch.autograd.grad of its output (14·B·H·N²·d")\
        if result.get("with_forward") else ("Backward pass", "torch.autograd.grad (10·B·H·N²·d")
    md = [f"{what[0]}, {result['dtype']}, {result['environment'].get('device', 'CUDA')}{fam}: TFLOP/s of "
          f"{what[1]}, halved when causal), B·N = 16k, H·d = 2048 ({result['commit']}).", "",
          "| d | causal | N | " + " | ".join(names) + " | fa / best peer | fa / sdpa-flash |",
          "|" + " --- |" * (len(names) + 5)]
    for r in result["rows"]:
        t = r["tflops"]
        cells = [f"{t[w]:.0f}" if w in t else "n/a" for w in names]
        ratio = f"{r['vs_best_peer']:.2f}×" if r["vs_best_peer"] else "–"
        flash = f"{t['fa'] / t['sdpa-flash']:.2f}×" if "fa" in t and "sdpa-flash" in t else "–"
        md.append(f"| {r['d']} | {'yes' if r['causal'] else 'no'} | {r['N']} | " + " | ".join(cells)
                  + f" | {ratio} | {flash} |")
    return "\n".join(md) + "\n"


def render(path):
    """Rewrites <path>.md from <path>.json (python3 -m bench.backward --render bench/results/backward.json)."""
    path = Path(path)
    result = json.loads(path.with_suffix(".json").read_text())
    path.with_suffix(".md").write_text(markdown_variants(result) if result.get("variants") else markdown(result))


if __name__ == "__main__":
    main()
