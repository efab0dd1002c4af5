# Backward-pass benchmark (CUDA): the gradients of attention through autograd, ours against SDPA's
# flash (FlashAttention-2), cuDNN and efficient backends, and FlashAttention-4 where importable, in
# one call, over FlashAttention's grid (B·N = 16384 tokens, H·d = 2048). Each provider's forward runs
# once outside the timing; the timed call is torch.autograd.grad of its output (retain_graph), L2
# flushed before each call and the providers interleaved (bench.attention.time_interleaved). TFLOP/s
# count the backward's five matrix products: 10 · B · H · N² · d, halved when causal. Before timing,
# each point checks our gradients against SDPA's in the same dtype (max |difference| / max |SDPA's
# gradient|, recorded). --family sm80 forces our sm_80 kernels (what an A100 runs). Writes <out>.json
# and <out>.md (the table, also printed); default bench/out/backward.
#
#   python3 -m bench.backward                                  # bf16, d 64 and 128, N 512..16k
#   python3 -m bench.backward --out bench/results/backward     # the committed table
#   python3 -m bench.backward --render bench/results/backward.json   # its .md again from the JSON
import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_flashattn
from torch_flashattn._testing import overrides

from bench.attention import environment, git_commit, time_interleaved

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
    if name == "fa":
        def run(q, k, v):
            with overrides(family=family):
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
    args = ap.parse_args(argv)
    if args.render:
        return render(args.render)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    names = ["fa"] + list(SDPA) + (["fa4"] if fa4_forward() is not None else [])
    rows = []
    for d in args.d:
        for causal in args.causal:
            for n in args.n:
                B, H = max(1, 16384 // n), 2048 // d
                g = torch.Generator(device="cuda").manual_seed(0)
                q, k, v = (torch.randn(B, H, n, d, device="cuda", dtype=dtype, generator=g).requires_grad_(True)
                           for _ in range(3))
                dout = torch.randn(B, H, n, d, device="cuda", dtype=dtype, generator=g)
                flops = 10.0 * B * H * n * n * d / (2 if causal else 1)
                calls, grads, notes = {}, {}, {}
                for name in names:
                    try:
                        out = forward_fn(name, causal, args.family)(q, k, v)
                        grads[name] = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
                        calls[name] = (lambda out=out: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
                    except Exception as e:  # a backend that refuses the point
                        notes[name] = f"n/a: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
                before = torch_flashattn.stats()["exact"]
                ref = grads.get("sdpa-flash") or grads.get("sdpa-cudnn")
                err = {}
                if "fa" in grads and ref is not None:
                    err = {w: ((a.float() - r.float()).abs().max() / r.float().abs().max()).item()
                           for w, a, r in zip(("dq", "dk", "dv"), grads["fa"], ref)}
                with overrides(family=args.family):
                    ms = dict(zip(calls, time_interleaved(list(calls.values()), args.budget)))
                exact = torch_flashattn.stats()["exact"] - before
                row = dict(d=d, causal=causal, N=n, B=B, H=H, ms=ms, notes=notes, rel_err_vs_sdpa=err,
                           exact_calls_while_timed=exact,
                           tflops={w: flops / t / 1e9 for w, t in ms.items()})
                peers = [w for w in row["tflops"] if w != "fa"]
                row["vs_best_peer"] = (row["tflops"]["fa"] / max(row["tflops"][w] for w in peers)
                                       if "fa" in row["tflops"] and peers else None)
                rows.append(row)
                print(json.dumps(row), flush=True)
                del q, k, v, dout, calls, grads, ref
                torch.cuda.empty_cache()
    result = dict(environment=environment("cuda"), commit=git_commit(), dtype=args.dtype, family=args.family,
                  rows=rows)
    text = markdown(result)
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    out.with_suffix(".md").write_text(text)


def markdown(result):
    """The table of one result: TFLOP/s per provider, ours against the best peer and against
    SDPA's flash backend (FlashAttention-2)."""
    names = ["fa"] + list(SDPA) + (["fa4"] if any("fa4" in r["tflops"] for r in result["rows"]) else [])
    fam = "" if result["family"] == "auto" else f", ours on the {result['family']} kernels (forced)"
    md = [f"Backward pass, {result['dtype']}, {result['environment'].get('device', 'CUDA')}{fam}: TFLOP/s of "
          f"torch.autograd.grad (10·B·H·N²·d, halved when causal), B·N = 16k, H·d = 2048 ({result['commit']}).", "",
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
    path.with_suffix(".md").write_text(markdown(json.loads(path.with_suffix(".json").read_text())))


if __name__ == "__main__":
    main()
