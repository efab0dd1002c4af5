# Split-count sweep of the decode kernel (csrc/cuda/decode.cu): forward_kvcache on bench/decode.py's
# shapes with the automatic split count and with decode_splits forced to each of a few counts (or,
# with --set, one override field set to each of a few values), beside SDPA's cuDNN backend. The
# columns of a shape are timed call by call in turn (bench.attention.time_interleaved), so drift
# falls on all alike; the last column is the best column's time over cuDNN's. Every column is
# checked against an fp32 SDPA reference on the valid prefixes (at most 2 × bf16 SDPA's error there)
# before it is timed; a failure prints and shows as nan. Each column runs under
# torch_flashattn._testing.overrides (docs/tuning.md). On the GPU machine, after the build:
#
#   python3 -m tools.decode_sweep [--splits 1 2 4 8 16 32 64] [--cluster off|on] [--warps 4|8]
#                                 [--flush read] [--shape B,Hq,Hkv,Nk ...] [--set decode_cluster=off,on]
#                                 [--cols "stages=3 warps=8" "stages=2" ...]
#
# --set FIELD=v1,v2,...: one column per value (splits by the rule). --cols: one column per argument,
# each a space-separated list of FIELD=value settings; an empty string is the rule's plan. A FIELD
# is an override name with or without its "decode_" prefix (splits, warps, stages, cluster, evict,
# combine). --cluster sets decode_cluster for every column: off merges the splits with the combine
# kernel, on inside a thread block cluster wherever the split count allows one (sm_90, 2..8
# splits). --warps sets decode_warps: the d <= 128 attend tile of 4 or 8 warps (8 on sm_90 only).
# --shape replaces bench.decode's shapes by the ones given (bf16, d = --d, every sequence full).
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench.attention import time_interleaved
from bench.decode import SHAPES, Shape

FIELDS = ("splits", "warps", "stages", "cluster", "evict", "combine")


def field(name):
    """An override field from a column's name: "stages", "STAGES" or "decode_stages"."""
    key = name.lower().removeprefix("decode_")
    if key not in FIELDS:
        raise SystemExit(f"{name}: not a decode override (decode_{', decode_'.join(FIELDS)}); "
                         "FA_DECODE_RUN, _SPEC and _PDL were removed with their code")
    return "decode_" + key


def value(text):
    return int(text) if text.lstrip("-").isdigit() else text


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m tools.decode_sweep",
                                 description="Split counts and other decode overrides, column by column, "
                                             "beside SDPA's cuDNN backend (TB/s).")
    ap.add_argument("--splits", nargs="*", type=int, default=[1, 2, 4, 8, 16, 32, 64],
                    help="forced split counts, a column each beside the rule's (none: the rule's only)")
    ap.add_argument("--set", metavar="FIELD=v1,v2,...", help="columns: FIELD set to each value (splits by the rule)")
    ap.add_argument("--cols", nargs="+", metavar="'FIELD=v FIELD=v'", help="columns: each a set of overrides")
    ap.add_argument("--budget", type=float, default=0.1, help="seconds of timed calls per column and shape")
    ap.add_argument("--cluster", choices=["off", "on"], help="decode_cluster for every column (default: the rule)")
    ap.add_argument("--warps", type=int, choices=[4, 8], help="decode_warps for every column (default: the rule)")
    ap.add_argument("--flush", choices=["zero", "read"], default="zero", help="L2 flush, as bench.decode's")
    ap.add_argument("--shape", nargs="+", metavar="B,Hq,Hkv,Nk", help="shapes instead of bench.decode's")
    ap.add_argument("--d", type=int, default=128, help="head dim of the --shape shapes")
    args = ap.parse_args(argv)
    import torch_flashattn  # noqa: F401  (torch.ops.fa)
    from torch_flashattn._testing import overrides
    shapes = SHAPES if not args.shape else [Shape(*(int(x) for x in t.split(",")), d=args.d) for t in args.shape]
    common = {}
    if args.cluster is not None:
        common["decode_cluster"] = args.cluster
    if args.warps is not None:
        common["decode_warps"] = args.warps
    if args.set:
        name, values = args.set.split("=", 1)
        cols = [(f"{field(name)[len('decode_'):]}={x}", {field(name): value(x)}) for x in values.split(",")]
    elif args.cols:
        cols = [(c.strip() or "auto", {field(kv.split("=", 1)[0]): value(kv.split("=", 1)[1]) for kv in c.split()})
                for c in args.cols]
    else:
        cols = [("auto", {})] + [(str(n), {"decode_splits": n}) for n in args.splits]
    print(f"TB/s of K+V read (valid tokens for fa, the padded cache for cuDNN); CUDA events, columns timed "
          f"call by call in turn, median, L2 flushed ({args.flush}) before each call, {args.budget:g} s per "
          f"column; decode_cluster {args.cluster or 'auto'}, decode_warps {args.warps or 'auto'}")
    w = max(6, max(len(c) for c, _ in cols))
    print(f"{'shape':28} {'cudnn':>6} " + " ".join(f"{c:>{w}}" for c, _ in cols) + "  best/cudnn")
    for s in shapes:
        if s.append:
            continue
        g = torch.Generator("cuda").manual_seed(0)
        q = torch.randn(s.B, s.Hq, 1, s.d, generator=g, device="cuda").to(torch.bfloat16)
        k = torch.randn(s.B, s.Hkv, s.Nk, s.d, generator=g, device="cuda").to(torch.bfloat16)
        v = torch.randn(s.B, s.Hkv, s.Nk, s.d, generator=g, device="cuda").to(torch.bfloat16)
        lengths = s.lengths()
        seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
        scale = s.d ** -0.5
        ref = [F.scaled_dot_product_attention(q[b:b + 1].float(), k[b:b + 1, :, :n].float(),
                                              v[b:b + 1, :, :n].float(), scale=scale, enable_gqa=True)
               for b, n in enumerate(lengths)]
        # The accuracy rule of the tests: at most 2 × the error of SDPA in bf16 on the same prefixes.
        pt = [F.scaled_dot_product_attention(q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n], scale=scale,
                                             enable_gqa=True) for b, n in enumerate(lengths)]
        bound = 2 * max((x.float() - r).abs().max().item() for x, r in zip(pt, ref)) + 1e-5
        bytes_valid = 2 * sum(lengths) * s.Hkv * s.d * 2

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=True)

        def column(fields):
            def call():
                with overrides(**{**common, **fields}):
                    return torch.ops.fa.forward_kvcache(q, k, v, seqlens, None, None, scale, False)
            return call

        fns, ok = [cudnn], []
        for name, fields in cols:
            call = column(fields)
            out = call()
            err = max((out[b:b + 1].float() - r).abs().max().item() for b, r in enumerate(ref))
            ok.append(err <= bound)
            if ok[-1]:
                fns.append(call)
            else:
                print(f"{s.label}, {name}: max error {err:.2e} > {bound:.2e}")
        ms = iter(time_interleaved(fns, args.budget, args.flush))
        t_cudnn = next(ms)
        times = [next(ms) if good else float("nan") for good in ok]
        row = [2 * s.B * s.Nk * s.Hkv * s.d * 2 / t_cudnn / 1e9] + [bytes_valid / t / 1e9 for t in times]
        best = min((t for t in times if t == t), default=float("nan"))
        print(f"{s.label:28} {row[0]:6.2f} " + " ".join(f"{x:{w}.2f}" for x in row[1:])
              + f"  {t_cudnn / best:10.3f}", flush=True)


if __name__ == "__main__":
    main()
