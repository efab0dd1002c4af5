# Decode benchmark: torch.ops.fa.forward_kvcache (split-KV) against SDPA's flash and cuDNN backends on
# GPU.md's decode shapes (one query token, bf16, d = 128), plus ragged batches. Effective bandwidth
# = bytes of K + V actually read / time: for ours the valid tokens Σ L_b only; SDPA has no ragged
# lengths, so on a ragged row it runs on the cache padded to Nmax and its figure counts what it reads.
#
#   python3 -m bench.decode                               # the table, printed and in bench/out/decode.*
#   python3 -m bench.decode --out bench/results/decode    # the committed decode.json and decode.md
#   python3 -m bench.decode --quick                       # two small shapes, seconds
import argparse
import json
import shlex
import sys
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench.attention import require_cuda, environment, git_commit, probe, time_interleaved


@dataclass(frozen=True)
class Shape:
    B: int
    Hq: int
    Hkv: int
    Nk: int                  # Nmax, the cache length
    ragged: bool = False     # lengths spread over 1..Nmax instead of all Nmax
    append: int = 0          # Nnew: new keys written into the cache by the call
    d: int = 128

    @property
    def label(self):
        n = f"{self.Nk // 1024}k" if self.Nk % 1024 == 0 else str(self.Nk)
        extra = (" ragged" if self.ragged else "") + (f" +{self.append}" if self.append else "")
        return f"B={self.B} H={self.Hq}/{self.Hkv} Nk={n}{extra}"

    def lengths(self):
        """Valid keys per sequence after the append."""
        if not self.ragged:
            return [self.Nk] * self.B
        return [max(1, round(self.Nk * (b + 1) / self.B)) for b in range(self.B)]


SHAPES = [Shape(1, 32, 32, 32768), Shape(1, 32, 8, 131072), Shape(8, 32, 8, 8192), Shape(8, 32, 8, 32768),
          Shape(32, 32, 8, 4096), Shape(64, 32, 32, 2048), Shape(1, 32, 32, 4096),
          Shape(8, 32, 8, 32768, ragged=True), Shape(64, 32, 8, 4096, ragged=True),
          Shape(8, 32, 8, 32768, append=1)]
QUICK = [Shape(1, 32, 8, 8192), Shape(8, 32, 8, 4096, ragged=True)]


def sdpa_call(backend, q, k, v, scale):
    """SDPA with GQA through enable_gqa; K/V expanded (before timing) only for a backend that refuses it."""
    group = q.shape[1] // k.shape[1]

    def native():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=group > 1)

    out, why = probe(native)
    if out is not None or group == 1:
        return native, why
    ke, ve = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)

    def expanded():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, ke, ve, scale=scale)

    out, why2 = probe(expanded)
    return (expanded, "K/V expanded for GQA") if out is not None else (None, why2)


def measure(s, flush, budget):
    dt = torch.bfloat16
    g = torch.Generator("cuda").manual_seed(0)
    q = torch.randn(s.B, s.Hq, 1, s.d, generator=g, device="cuda").to(dt)
    k = torch.randn(s.B, s.Hkv, s.Nk, s.d, generator=g, device="cuda").to(dt)
    v = torch.randn(s.B, s.Hkv, s.Nk, s.d, generator=g, device="cuda").to(dt)
    lengths = s.lengths()
    seqlens = torch.tensor([n - s.append for n in lengths], dtype=torch.int32, device="cuda")
    k_new = torch.randn(s.B, s.Hkv, s.append, s.d, generator=g, device="cuda").to(dt) if s.append else None
    v_new = torch.randn(s.B, s.Hkv, s.append, s.d, generator=g, device="cuda").to(dt) if s.append else None
    scale = s.d ** -0.5
    es = 2
    bytes_valid = 2 * sum(lengths) * s.Hkv * s.d * es
    bytes_full = 2 * s.B * s.Nk * s.Hkv * s.d * es

    def ours():   # writes the same rows every call when appending: repeatable
        return torch.ops.fa.forward_kvcache(q, k, v, seqlens, k_new, v_new, scale, False)

    rows = {}
    out = ours()
    # check: per-sequence fp32 SDPA on each valid prefix
    err = 0.0
    for b, n in enumerate(lengths):
        ref = F.scaled_dot_product_attention(q[b:b + 1].float(), k[b:b + 1, :, :n].float(), v[b:b + 1, :, :n].float(),
                                             scale=scale, enable_gqa=True)
        err = max(err, (out[b:b + 1].float() - ref).abs().max().item())
    rows["fa"] = {"max_err": err}

    # Every provider's calls in turn (bench.attention.time_interleaved): drift falls on all alike.
    names, calls = ["fa"], [ours]
    for name, backend in (("sdpa-flash", SDPBackend.FLASH_ATTENTION), ("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION)):
        call, why = sdpa_call(backend, q, k, v, scale)
        if call is None:
            rows[name] = {"na": why}
            continue
        rows[name] = {"note": why} if why else {}
        names.append(name)
        calls.append(call)
    for name, ms in zip(names, time_interleaved(calls, budget, flush)):
        rows[name].update(ms=ms, tbs=(bytes_valid if name == "fa" else bytes_full) / ms / 1e9)
    for name in ("sdpa-flash", "sdpa-cudnn"):
        if "ms" in rows[name]:
            rows["fa"][f"speedup_vs_{name}"] = rows[name]["ms"] / rows["fa"]["ms"]
    return {"kv_mb_valid": bytes_valid / 1e6, "kv_mb_read_by_sdpa": bytes_full / 1e6, "results": rows}


def markdown(result):
    lines = [f"Decode on {result['device']}, torch {result['torch']}, {result['date'][:10]}, commit "
             f"{(result['git_commit'] or '?')[:12]}: `{result['command']}`", "",
             f"bf16, one query token, d = 128; time: {result['timer']}. TB/s = bytes of K+V read / time: ours "
             "counts the valid tokens, SDPA the whole (padded) cache it is given. `x/y`: time of y over time of x.",
             "", "| shape | KV MB | fa µs | fa TB/s | flash TB/s | cudnn TB/s | fa/flash | fa/cudnn | fa err |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for p in result["points"]:
        r = p["results"]

        def tbs(n):
            return f"{r[n]['tbs']:.2f}" if "tbs" in r[n] else "n/a"

        def ratio(n):
            x = r["fa"].get(f"speedup_vs_{n}")
            return f"{x:.2f}" if x else "–"
        lines.append(f"| {p['label']} | {p['kv_mb_valid']:.0f} | {r['fa']['ms'] * 1e3:.1f} | {tbs('fa')} | "
                     f"{tbs('sdpa-flash')} | {tbs('sdpa-cudnn')} | {ratio('sdpa-flash')} | {ratio('sdpa-cudnn')} | "
                     f"{r['fa']['max_err']:.1e} |")
    notes = set()
    for p in result["points"]:
        for n in ("sdpa-flash", "sdpa-cudnn"):
            r = p["results"][n]
            if "na" in r or "note" in r:
                notes.add(f"- {n}, {p['label']}: {r.get('na') or r.get('note')}")
    return "\n".join(lines + ([""] + sorted(notes) if notes else [])) + "\n"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python3 -m bench.decode", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="two small shapes")
    ap.add_argument("--budget", type=float, default=0.2, help="seconds of timed calls per provider and shape")
    ap.add_argument("--out", default="bench/out/decode",
                    help="output path without suffix (default bench/out/decode; bench/results/decode for "
                         "the committed files)")
    ap.add_argument("--flush", choices=["zero", "read"], default="zero",
                    help="L2 flush before each timed call: a zero fill as do_bench's (default; its dirty "
                         "lines are written back during the call) or a read of 256 MB")
    args = ap.parse_args(argv)
    require_cuda("bench.decode")
    import torch_flashattn  # noqa: F401  (registers torch.ops.fa)
    note = ("CUDA events, the providers' calls timed in turn, 5 warm-up each, median of >= 10 calls / budget, "
            + ("L2 flushed by reading 256 MB" if args.flush == "read" else "L2 flushed by writing 256 MB of zeros"))
    result = {"name": "decode", "command": shlex.join(["python3", "-m", "bench.decode", *argv]),
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "git_commit": git_commit(),
              **environment("cuda"), "timer": f"{note} ({args.budget:g} s)", "points": []}
    for s in QUICK if args.quick else SHAPES:
        point = {**asdict(s), "label": s.label, **measure(s, args.flush, args.budget)}
        result["points"].append(point)
        r = point["results"]
        print(s.label + "  " + "  ".join(f"{n} {x['tbs']:.2f} TB/s" if "tbs" in x else f"{n} n/a"
                                         for n, x in r.items()), flush=True)
        torch.cuda.empty_cache()
    table = markdown(result)
    print("\n" + table)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        Path(str(out) + ".json").write_text(json.dumps(result, indent=1) + "\n")
        Path(str(out) + ".md").write_text(table)
        print(f"wrote {out}.json, {out}.md")


if __name__ == "__main__":
    main()
