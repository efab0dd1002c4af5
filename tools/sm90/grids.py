"""The same tokens on each Hopper grid: our dense kernel on (B, N, H, d) views, the visibility-variant
kernel (`FA_VAR_MASKS`, reached with sinks of −30, which change no digit that matters here) and packed
sequences of equal lengths, each with the grid automatic, one CTA per tile and persistent; then causal
sliding windows on each grid beside the plain causal call. bf16, d = 128, H = 16, two rounds; one JSON
line per call (TFLOP/s over the visible pairs). --windows D: only the windows, at d = D (H = 2048 / D),
the grids timed call by call in turn (bench.attention.time_interleaved, L2 zero-filled; "counter":
the packed kernels' walk over the batch entries, fa_plan_sm90_counter), and beside them the same
tokens as packed sequences of equal lengths (attention_varlen on (B·N, H, d) copies: the packed
kernels' rank-major walk, fed by a tile counter; packed/static: the same walk, every grid-th item,
sm90_grid="persistent"). --tiles: windows at d = 64 (H = 32) on each of its tiles (sm90_short_tile
off: 3 consumers, 192 rows; on: 2 consumers, 128 rows), automatic grid, beside the dense call of the
same tokens (causal for causal windows), in turn.

    python3 -m tools.sm90.grids > grids.jsonl
    python3 -m tools.sm90.grids --windows 64 [--short] [--rounds 2]
    python3 -m tools.sm90.grids --tiles [--rounds 2]
"""
import argparse
import json
import os
import sys

import torch
import triton

import torch_flashattn
from torch_flashattn._testing import overrides

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from bench.attention import time_interleaved  # noqa: E402

H, d = 16, 128
WINDOWS = ((4, 4096, 1024), (1, 16384, 1024), (1, 16384, 4096), (4, 4096, 256))   # (B, N, left)
WINDOWS_2K = ((8, 2048, 1024), (8, 2048, 512), (16, 1024, 256))                   # --windows only
WINDOWS_SHORT = ((32, 512, 128), (16, 1024, 128), (16, 1024, 256), (16, 1024, 512), (8, 2048, 128),
                 (8, 2048, 256), (4, 4096, 256), (4, 4096, 512), (1, 16384, 256))      # --windows --short
GRIDS = ("auto", "tile", "persistent")
WINDOW_GRIDS = GRIDS + ("counter",)            # --windows: the packed walk over the batch entries too,
COLUMNS = WINDOW_GRIDS + ("packed", "packed/static")   # and the same tokens as packed sequences


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=120, return_mode="median")


def rec(tag, grid, flops, fn):
    with overrides(sm90_grid=grid):
        fn()
        torch.cuda.synchronize()
        ms = bench(fn)
    print(json.dumps({"tag": tag, "grid": grid, "tflops": round(flops / ms / 1e9, 1)}), flush=True)


def main():
    g = torch.Generator(device="cuda").manual_seed(0)
    for _ in range(2):
        for B, L, causal in ((4, 4096, True), (8, 2560, True), (8, 2560, False), (16, 1024, True)):
            T = B * L
            q, k, v = (torch.randn(T, H, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
            qb, kb, vb = (x.view(B, L, H, d).transpose(1, 2) for x in (q, k, v))
            cu = torch.arange(0, T + 1, L, dtype=torch.int32, device="cuda")
            flops = 4.0 * d * H * B * (L * (L + 1) // 2 if causal else L * L)
            sinks = torch.full((H,), -30.0, device="cuda")
            tag = f"{B}x{L} c{int(causal)}"
            for grid in ("auto", "tile", "persistent"):
                rec(tag + " dense", grid, flops, lambda: torch_flashattn.attention(qb, kb, vb, causal=causal))
                rec(tag + " sinks", grid, flops,
                    lambda: torch_flashattn.attention(qb, kb, vb, causal=causal, sinks=sinks))
            rec(tag + " packed", "auto", flops,
                lambda: torch_flashattn.attention_varlen(q, k, v, cu, cu, L, L, causal=causal))
        for B, N, left in WINDOWS:
            q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
            flops = 4.0 * d * H * B * sum(min(i + 1, left + 1) for i in range(N))
            for grid in GRIDS:
                rec(f"win{left} {B}x{N}", grid, flops,
                    lambda: torch_flashattn.attention(q, k, v, causal=True, window=(left, -1)))
            rec(f"causal {B}x{N}", "auto", 4.0 * d * H * B * N * (N + 1) / 2,
                lambda: torch_flashattn.attention(q, k, v, causal=True))


def windows(dw, rounds, points=WINDOWS + WINDOWS_2K):
    """Causal windows at d = dw on each grid, in turn; the table of medians over the rounds."""
    hw = 2048 // dw
    g = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for B, N, left in points:
        q, k, v = (torch.randn(B, hw, N, dw, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
        flops = 4.0 * dw * hw * B * sum(min(i + 1, left + 1) for i in range(N))

        def call(grid):
            def fn():
                with overrides(sm90_grid=grid):
                    torch_flashattn.attention(q, k, v, causal=True, window=(left, -1))
            return fn
        outs = []
        for grid in WINDOW_GRIDS:                   # each grid computes each tile alike: the same bits
            with overrides(sm90_grid=grid):
                outs.append(torch_flashattn.attention(q, k, v, causal=True, window=(left, -1)))
        same = all(torch.equal(o, outs[0]) for o in outs[1:])
        qp, kp, vp = (x.transpose(1, 2).reshape(B * N, hw, dw) for x in (q, k, v))
        cu = torch.arange(0, B * N + 1, N, dtype=torch.int32, device="cuda")

        def packed():
            return torch_flashattn.attention_varlen(qp, kp, vp, cu, cu, N, N, causal=True, window=(left, -1))

        def packed_static():
            with overrides(sm90_grid="persistent"):
                return packed()
        err = max((f().view(B, N, hw, dw).transpose(1, 2).float() - outs[0].float()).abs().max().item()
                  for f in (packed, packed_static))
        per = {grid: [] for grid in COLUMNS}
        for _ in range(rounds):
            ms = time_interleaved([call(grid) for grid in WINDOW_GRIDS] + [packed, packed_static], 0.5)
            for grid, t in zip(COLUMNS, ms):
                per[grid].append(round(flops / t / 1e9, 1))
        rec_ = {"d": dw, "B": B, "N": N, "left": left, "same_bits": same, "packed_err": err, **per}
        print(json.dumps(rec_), flush=True)
        rows.append(rec_)
    print(f"window, d = {dw}, bf16: TFLOP/s over the visible pairs, medians of {rounds} rounds in turn")
    print("point".ljust(22) + "".join(gr.rjust(12) for gr in COLUMNS))
    for r in rows:
        print(f"({r['left']}, 0) {r['B']} x {r['N']}".ljust(22)
              + "".join(f"{sorted(r[gr])[len(r[gr]) // 2]:12.1f}" for gr in COLUMNS))


# --tiles: (B, N, left, right), right −1: causal; B·N = 16k.
TILE_POINTS = ((8, 2048, 128, -1), (8, 2048, 512, -1), (4, 4096, 128, -1), (4, 4096, 256, -1), (4, 4096, 512, -1),
               (4, 4096, 1024, -1), (4, 4096, 2048, -1), (1, 16384, 256, -1), (1, 16384, 1024, -1),
               (1, 16384, 4096, -1), (2, 8192, 64, 64), (4, 4096, 256, 256), (1, 16384, 1024, 1024))
TILES = ("off", "on")


def visible(N, left, right):
    """Pairs a window leaves visible in an N × N call (right −1: causal)."""
    r = 0 if right < 0 else right
    return sum(min(i, left) + 1 + min(N - 1 - i, r) for i in range(N))


def tiles(rounds):
    """Windows at d = 64 on the 3-consumer and the 2-consumer tile (sm90_short_tile), automatic grid,
    and the dense call of the same tokens; medians over the rounds, TFLOP/s over the visible pairs."""
    dw, hw = 64, 32
    g = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for B, N, left, right in TILE_POINTS:
        q, k, v = (torch.randn(B, hw, N, dw, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
        causal = right < 0
        kw = dict(causal=True, window=(left, -1)) if causal else dict(window=(left, right))

        def call(tile):
            def fn():
                with overrides(sm90_short_tile=tile):
                    return torch_flashattn.attention(q, k, v, **kw)
            return fn

        def dense():
            return torch_flashattn.attention(q, k, v, causal=causal)
        err = (call("on")().float() - call("off")().float()).abs().max().item()
        per = {c: [] for c in TILES + ("dense",)}
        pairs = 4.0 * dw * hw * B * visible(N, left, right)
        full = 4.0 * dw * hw * B * (N * (N + 1) // 2 if causal else N * N)
        for _ in range(rounds):
            ms = time_interleaved([call(t) for t in TILES] + [dense], 0.5)
            for c, t in zip(TILES, ms):
                per[c].append(round(pairs / t / 1e9, 1))
            per["dense"].append(round(full / ms[-1] / 1e9, 1))
        rec_ = {"B": B, "N": N, "left": left, "right": right, "tiles_err": err, **per}
        print(json.dumps(rec_), flush=True)
        rows.append(rec_)
    med = lambda x: sorted(x)[len(x) // 2]   # noqa: E731
    print(f"windows, d = 64, H = 32, bf16: TFLOP/s over the visible pairs, medians of {rounds} rounds in turn;"
          " short: sm90_short_tile on / off")
    print("point".ljust(26) + "".join(c.rjust(10) for c in ("3 cons.", "2 cons.", "dense", "short", "best/dense")))
    for r in rows:
        a, b, dn = med(r["off"]), med(r["on"]), med(r["dense"])
        print(f"({r['left']}, {max(r['right'], 0)}) {r['B']} x {r['N']}".ljust(26)
              + f"{a:10.1f}{b:10.1f}{dn:10.1f}{b / a:10.3f}{max(a, b) / dn:10.3f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--windows", type=int, metavar="D", help="only the causal windows, at d = D")
    ap.add_argument("--tiles", action="store_true", help="d = 64 windows on each tile (sm90_short_tile)")
    ap.add_argument("--short", action="store_true", help="--windows: windows of 128-512 keys over 512-16k")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    if args.tiles:
        tiles(args.rounds)
    elif args.windows:
        windows(args.windows, args.rounds, WINDOWS_SHORT if args.short else WINDOWS + WINDOWS_2K)
    else:
        main()
