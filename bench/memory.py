# Peak CUDA memory of one attention forward: O(N) for the fused kernel, O(N²) for anything that
# stores the score matrix. For each N, allocates q, k, v (bf16, B=1, H=16, d=128), resets the peak
# counter, runs one provider, and records the peak minus the inputs' bytes.
#
#   python3 -m bench.memory                                # -> bench/out/memory.json, memory.md
#   python3 -m bench.memory --out bench/results/memory     # the committed table
import argparse
import json
from datetime import datetime, timezone
from pathlib import Path

import torch

from bench.attention import PROVIDERS, require_cuda

PROVIDER_NAMES = ["fa", "naive-cuda", "sdpa-flash", "sdpa-cudnn", "sdpa-math"]


def peak_mb(run, q, k, v):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    try:
        out = run(q, k, v, False, None)
    except (RuntimeError, torch.OutOfMemoryError) as e:
        return None, str(e).splitlines()[0][:100]
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del out
    return peak / 2**20, None


def main():
    ap = argparse.ArgumentParser(prog="python3 -m bench.memory",
                                 description="Peak CUDA memory of one attention forward per provider.")
    ap.add_argument("--n", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--out", default="bench/out/memory",
                    help="output path without suffix (default bench/out/memory; bench/results/memory for "
                         "the committed table)")
    args = ap.parse_args()
    require_cuda("bench.memory")
    B, H, d = 1, 16, 128
    rows = []
    for n in args.n:
        q, k, v = (torch.randn(B, H, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        row = {"N": n, "output_mb": q.numel() * 2 / 2**20}
        for name in PROVIDER_NAMES:
            prov = PROVIDERS[name]
            with prov.context():
                row[name], err = peak_mb(prov.run, q, k, v)
            if err:
                row[name + "_error"] = err
        rows.append(row)
        del q, k, v
        torch.cuda.empty_cache()
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "date": datetime.now(timezone.utc).isoformat(), "shape": f"bf16, B={B}, H={H}, d={d}",
              "providers": PROVIDER_NAMES, "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out + ".json").write_text(json.dumps(result, indent=1))
    lines = [f"Peak CUDA memory of one forward beyond the inputs, MiB ({result['shape']}, {result['device']}, "
             f"torch {result['torch']}); the output alone is B·H·N·d·2 bytes.", "",
             "| N | output | " + " | ".join(PROVIDER_NAMES) + " |",
             "| --- | --- | " + " | ".join("---" for _ in PROVIDER_NAMES) + " |"]
    for r in rows:
        cells = ["n/a" if r[n] is None else f"{r[n]:.0f}" for n in PROVIDER_NAMES]
        lines.append(f"| {r['N']} | {r['output_mb']:.0f} | " + " | ".join(cells) + " |")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
