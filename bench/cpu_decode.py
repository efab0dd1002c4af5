# Decoding steps on the CPU: torch_flashattn.attention with one query (or a few) per sequence against
# SDPA's CPU kernel, plain and as the transformers backend calls it in padded generation (left-padded
# keys as key_mask, the queries bottom-right; SDPA gets the same as a boolean mask). fp32 and bf16,
# the machine's threads; ms per call, medians of calls interleaved round by round (so that a slow
# stretch of the host falls on both alike), and SDPA's time over ours (above 1: ours is faster).
#
#   python3 -m bench.cpu_decode                              # bench/out/cpu_decode.*
#   python3 -m bench.cpu_decode --out bench/results/cpu_decode
import argparse
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import torch_flashattn
from bench.attention import git_commit, write_rows
from bench.padded_decode import left_padding

REPO = Path(__file__).resolve().parent.parent
# (B, Hq, Hkv, d, Nk, Nq): the transformers benchmark's heads (16 over 4 KV heads, and over 2), one
# long sequence, MHA, and a few queries per sequence.
SHAPES = [(8, 16, 4, 128, 2048, 1), (8, 16, 2, 64, 512, 1), (1, 32, 8, 128, 8192, 1), (8, 16, 16, 64, 1024, 1),
          (8, 16, 4, 128, 2048, 4)]


def timed(fns, budget_s):
    """Median ms of each of fns: one warm-up each, then rounds of one call each, the order reversed
    every other round, until budget_s is spent (at least 5 rounds)."""
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    start, r = time.perf_counter(), 0
    while r < 5 or (time.perf_counter() - start < budget_s and r < 200):
        order = range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))
        for i in order:
            t = time.perf_counter()
            fns[i]()
            times[i].append(time.perf_counter() - t)
        r += 1
    return [statistics.median(t) * 1e3 for t in times]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(REPO / "bench/out/cpu_decode"))
    ap.add_argument("--budget", type=float, default=2.0, help="seconds per row")
    args = ap.parse_args(argv)
    g = torch.Generator().manual_seed(0)
    rows = []
    with torch.no_grad():
        for dtype in (torch.float32, torch.bfloat16):
            for B, Hq, Hkv, d, Nk, Nq in SHAPES:
                q = torch.randn(B, Hq, Nq, d, generator=g).to(dtype)
                k, v = (torch.randn(B, Hkv, Nk, d, generator=g).to(dtype) for _ in range(2))
                km, _ = left_padding(B, Nk, "cpu")
                dense = km[:, None, None, :] & torch.ones(Nq, Nk, dtype=torch.bool).tril(Nk - Nq)
                gqa = Hq != Hkv
                for masked in (False, True):
                    kw = dict(causal=True, causal_align="bottom_right", key_mask=km) if masked else {}
                    ours = lambda: torch_flashattn.attention(q, k, v, **kw)  # noqa: E731
                    sdpa = lambda: F.scaled_dot_product_attention(  # noqa: E731
                        q, k, v, attn_mask=dense if masked else None, enable_gqa=gqa)
                    t_ours, t_sdpa = timed([ours, sdpa], args.budget)
                    rows.append(dict(dtype=str(dtype).split(".")[1], shape=f"B={B} H={Hq}/{Hkv} d={d} Nk={Nk} Nq={Nq}",
                                     key_mask=masked, ms=t_ours, ms_sdpa=t_sdpa))
                    print(rows[-1], flush=True)
    ratios = [r["ms_sdpa"] / r["ms"] for r in rows]
    geo = statistics.geometric_mean(ratios)
    md = [f"Decoding steps on the CPU ({torch.get_num_threads()} threads, {git_commit()}): `attention(q, k, v)` "
          "and, with key_mask, `attention(q, k, v, causal=True, causal_align=\"bottom_right\", key_mask=...)` "
          "over left-padded keys; SDPA (its CPU kernel) gets the padding and the diagonal as a boolean mask. "
          "ms per call, medians of interleaved calls; sdpa / ours above 1: ours is faster.", "",
          "| dtype | shape | key_mask | ours ms | SDPA ms | sdpa / ours |", "| --- | --- | --- | --- | --- | --- |"]
    for r, x in zip(rows, ratios):
        md.append(f"| {r['dtype']} | {r['shape']} | {'yes' if r['key_mask'] else 'no'} | {r['ms']:.3f} | "
                  f"{r['ms_sdpa']:.3f} | {x:.2f}× |")
    md += ["", f"sdpa / ours: geometric mean **{geo:.2f}×** over {len(rows)} rows (min {min(ratios):.2f}, "
           f"max {max(ratios):.2f})."]
    write_rows(args.out, "\n".join(md) + "\n", rows, device="cpu")


if __name__ == "__main__":
    main()
