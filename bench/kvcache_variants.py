# The KV cache's variants against our own dense decode (torch_flashattn.attention_kvcache, split-KV),
# one query token per sequence, bf16, d = 128, GQA 32/8, on the same caches in one process: effective
# bandwidth (bytes of K + V a call must read / time: for a window only the keys it sees) and the
# ratio to the plain call, plus the exact path (PyTorch) that computed these calls before the
# split-KV kernel took them. Timing: triton's do_bench, its default (zero-fill) L2 flush.
#
#   python3 -m bench.kvcache_variants                                  # bench/out/kvcache_variants.*
#   python3 -m bench.kvcache_variants --out bench/results/kvcache_variants
import argparse
import json
from pathlib import Path

import torch

import torch_flashattn
from bench.attention import require_cuda, write_rows

REPO = Path(__file__).resolve().parent.parent
# (B, Nmax): one long sequence, a batch.
SHAPES = [(1, 32768), (8, 8192)]
CASES = {
    "plain": dict(),
    "softcap 30": dict(softcap=30.0),
    "ALiBi": dict(alibi=True),
    "sinks": dict(sinks=True),
    "sliding 4096": dict(window=(4096, -1)),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(REPO / "bench/out/kvcache_variants"))
    args = ap.parse_args(argv)
    require_cuda("bench.kvcache_variants")
    from torch_flashattn._testing import exact_path
    from triton.testing import do_bench
    Hq, Hkv, d, dtype = 32, 8, 128, torch.bfloat16
    g = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for B, N in SHAPES:
        q = torch.randn(B, Hq, 1, d, device="cuda", dtype=dtype, generator=g)
        k, v = (torch.randn(B, Hkv, N, d, device="cuda", dtype=dtype, generator=g) for _ in range(2))
        base = None
        for name, c in CASES.items():
            kw = dict(window=c.get("window", (-1, -1)), softcap=c.get("softcap"))
            if c.get("alibi"):
                kw["alibi_slopes"] = torch.tensor([2 ** (-8 * (h + 1) / Hq) for h in range(Hq)], device="cuda")
            if c.get("sinks"):
                kw["sinks"] = torch.randn(Hq, device="cuda", generator=g)
            fn = lambda: torch_flashattn.attention_kvcache(q, k, v, **kw)  # noqa: E731
            keys = min(N, kw["window"][0] + 1) if kw["window"][0] >= 0 else N
            nbytes = 2 * B * Hkv * keys * d * 2
            ms = do_bench(fn, warmup=25, rep=200, return_mode="median")
            with exact_path():
                ms_exact = do_bench(fn, warmup=5, rep=100, return_mode="median")
            base = ms if name == "plain" else base
            row = dict(shape=f"B={B} H={Hq}/{Hkv} Nk={N // 1024}k", case=name, us=ms * 1e3, us_exact=ms_exact * 1e3,
                       tb_s=nbytes / ms / 1e9, vs_plain_time=base / ms)
            rows.append(row)
            print(json.dumps(row), flush=True)
    md = [f"The KV cache's variants in the split-KV kernel, bf16, d = 128, one query, {torch.cuda.get_device_name().removeprefix('NVIDIA ')} ({git_commit()}): "
          "µs per call (do_bench, zero-fill L2 flush), effective TB/s over the K and V rows the call must "
          "read, the plain call's time over the variant's, and the exact path's µs (the plain call has no "
          "variant: there it is the same kernel).", "",
          "| shape | variant | µs | TB/s | plain / variant | exact path µs |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        md.append(f"| {r['shape']} | {r['case']} | {r['us']:.1f} | {r['tb_s']:.2f} | {r['vs_plain_time']:.2f}× | "
                  f"{r['us_exact']:.0f} |")
    write_rows(args.out, "\n".join(md) + "\n", rows)


if __name__ == "__main__":
    main()
