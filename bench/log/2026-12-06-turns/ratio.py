"""A tile's first Q Kᵀ and last P V outside the ping-pong turns ("inner", FlashAttention-3's form)
against every issue taking a turn ("all", today's kernel), selected by sm90_turns in one process and
one build, timed in rotated rounds (triton.testing.do_bench, default L2 flush); FlashAttention-3
beside them where its wheel imports (bf16 only; (B, N, H, d) copies of the same values).
B · N = 16k, H · d = 2048. Before the timings, each point's outputs under both settings must be the
same bits (the arithmetic and its order do not change). One JSON line per check and per timing.

    PYTHONPATH=<build>[:<fa3>] python3 bench/log/2026-12-06-turns/ratio.py LABEL [rounds] >> ratio.jsonl
    python3 bench/log/2026-12-06-turns/ratio.py --summary ratio.jsonl

The switch reaches the d = 128 causal tile from 4096 keys (plain calls); d = 128 causal 2k (the
plain d = 128 tile) and d = 256 causal 8k run the same kernel under both names: their ratios are
the call's noise floor.
"""
import json
import statistics
import sys
from collections import defaultdict

MODES = ("all", "inner")


def summary(path):
    t, bad = defaultdict(list), []
    for line in open(path):
        r = json.loads(line)
        if r.get("check") == "same_bits":
            if not r["ok"]:
                bad.append((r["dtype"], r["d"], r["N"]))
        elif "who" in r:
            t[(r["dtype"], r["d"], r["N"], r["B"], r["who"])].append(r["tflops"])
    print("same bits:", "all points" if not bad else f"DIFFER at {bad}")
    print("| dtype | d | N | B | all | inner | fa3 | inner / all (rounds) | inner / all | all / fa3 | inner / fa3 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for p in sorted({k[:4] for k in t}):
        med = {w: statistics.median(t[p + (w,)]) for w in MODES + ("fa3",) if t.get(p + (w,))}
        per = " ".join(f"{b / a:.3f}" for a, b in zip(t[p + ("all",)], t[p + ("inner",)]))
        f3 = f"{med['fa3']:.1f}" if "fa3" in med else "–"
        r3 = lambda w: f"{med[w] / med['fa3']:.3f}" if "fa3" in med else "–"
        print(f"| {p[0]} | {p[1]} | {p[2]} | {p[3]} | {med['all']:.1f} | {med['inner']:.1f} | {f3} | {per} "
              f"| {med['inner'] / med['all']:.3f} | {r3('all')} | {r3('inner')} |")


def main():
    import torch
    from triton.testing import do_bench

    import torch_flashattn
    from torch_flashattn._testing import overrides

    try:
        from fa3_fwd_interface import flash_attn_func as fa3
    except ImportError:
        fa3 = None

    label = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    gpu = torch.cuda.get_device_name()
    bf, fp = torch.bfloat16, torch.float16
    # (dtype, d, N, B): B · N = 16k but for the B = 1 point at 8k (one CTA per head's 64 tiles).
    points = [(bf, 128, 4096, 4), (bf, 128, 8192, 2), (bf, 128, 16384, 1), (bf, 128, 8192, 1),
              (fp, 128, 8192, 2), (bf, 128, 2048, 8), (bf, 256, 8192, 2)]
    for dt, d, N, B in points:
        H = 2048 // d
        g = torch.Generator(device="cuda").manual_seed(N + d + B)
        q, k, v = (torch.randn(B, H, N, d, dtype=dt, device="cuda", generator=g) for _ in range(3))
        ours = lambda: torch_flashattn.attention(q, k, v, causal=True)
        fns = {m: (m, ours) for m in MODES}
        if fa3 is not None and dt == bf:
            qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
            fns["fa3"] = (None, lambda: fa3(qt, kt, vt, causal=True))
        outs = {}
        for m in MODES:
            with overrides(sm90_turns=m):
                outs[m] = torch_flashattn.attention_lse(q, k, v, causal=True)
        same = all(torch.equal(a, b) for a, b in zip(outs["all"], outs["inner"]))
        print(json.dumps({"label": label, "check": "same_bits", "dtype": str(dt)[6:], "d": d, "N": N, "B": B,
                          "ok": same}), flush=True)
        del outs
        names = list(fns)
        flops = 4 * B * H * N * N * d / 2
        for r in range(rounds):
            for n in names[r % len(names):] + names[:r % len(names)]:
                mode, fn = fns[n]
                with overrides(**({"sm90_turns": mode} if mode else {})):
                    ms = do_bench(fn, warmup=25, rep=100)
                print(json.dumps({"label": label, "gpu": gpu, "dtype": str(dt)[6:], "d": d, "N": N, "B": B,
                                  "round": r, "who": n, "ms": ms, "tflops": flops / ms / 1e9}), flush=True)
        del q, k, v
        torch.cuda.empty_cache()


if __name__ == "__main__":
    summary(sys.argv[2]) if sys.argv[1] == "--summary" else main()
