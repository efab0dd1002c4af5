# A padded batch's decoding step: torch_flashattn.attention with one query (or a few) per sequence
# over left-padded keys (key_mask), the queries bottom-right, bf16, as the transformers backend calls
# it during padded generation. Our route to the split-KV kernel (automatic) against the forward kernels
# (split_kv "off": what ran these calls before), SDPA with the padding as a boolean mask (its
# efficient and cuDNN backends), and our own attention_kvcache over right-padded caches of the same
# lengths (cache_seqlens: the same keys read, no mask). Rows without key_mask time the plain call both
# ways (non-causal, no variant: the split-KV rule of plain calls). Timing: triton's do_bench, its default (zero-fill) L2 flush; µs per call and each time over
# ours.
#
#   python3 -m bench.padded_decode                                   # bench/out/padded_decode.*
#   python3 -m bench.padded_decode --out bench/results/padded_decode
import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import torch_flashattn
from bench.attention import require_cuda, write_rows

REPO = Path(__file__).resolve().parent.parent
# (B, Hq, Hkv, d, Nk, Nq): the transformers benchmark's shape (hidden 2048, 16 heads, 4 KV heads),
# wider batches, one long sequence, MHA, d = 64, and a few queries (speculative decoding) up to and
# past the rule's 32 rows per KV head.
SHAPES = [(8, 16, 4, 128, 2080, 1), (32, 32, 8, 128, 4096, 1), (1, 32, 8, 128, 16384, 1),
          (8, 32, 32, 128, 2048, 1), (1, 32, 32, 128, 16384, 1), (64, 32, 8, 64, 1024, 1),
          (8, 32, 8, 128, 4096, 4), (8, 32, 8, 128, 4096, 8), (8, 32, 4, 128, 4096, 4),
          (8, 32, 8, 128, 4096, 16)]


def left_padding(B, Nk, device):
    """Sequence b holds Nk − (b · 211 mod Nk/2) keys, padded on the left."""
    lengths = [Nk - (b * 211) % (Nk // 2) for b in range(B)]
    mask = torch.zeros(B, Nk, dtype=torch.bool, device=device)
    for b, n in enumerate(lengths):
        mask[b, Nk - n:] = True
    return mask, lengths


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(REPO / "bench/out/padded_decode"))
    args = ap.parse_args(argv)
    require_cuda("bench.padded_decode")
    from torch_flashattn._testing import overrides
    from triton.testing import do_bench
    dtype = torch.bfloat16
    g = torch.Generator(device="cuda").manual_seed(0)
    rows = []

    def bench(fn):
        try:
            return do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e3
        except RuntimeError:
            return None

    for B, Hq, Hkv, d, Nk, Nq in SHAPES:
        q = torch.randn(B, Hq, Nq, d, device="cuda", dtype=dtype, generator=g)
        k, v = (torch.randn(B, Hkv, Nk, d, device="cuda", dtype=dtype, generator=g) for _ in range(2))
        km, lengths = left_padding(B, Nk, "cuda")
        # Right-padded caches holding the same keys, for attention_kvcache.
        kr, vr = torch.zeros_like(k), torch.zeros_like(v)
        for b, n in enumerate(lengths):
            kr[b, :, :n], vr[b, :, :n] = k[b, :, Nk - n:], v[b, :, Nk - n:]
        seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
        # SDPA's boolean mask, query i at position Nk − Nq + i (bottom-right causal and the padding).
        causal = torch.ones(Nq, Nk, dtype=torch.bool, device="cuda").tril(Nk - Nq)
        dense = km[:, None, None, :] & causal
        kx, vx = (t.repeat_interleave(Hq // Hkv, dim=1) for t in (k, v))
        shape = f"B={B} H={Hq}/{Hkv} d={d} Nk={Nk} Nq={Nq}"
        for masked in (True, False):
            kw = dict(causal=True, causal_align="bottom_right", key_mask=km) if masked else {}
            ours = lambda: torch_flashattn.attention(q, k, v, **kw)  # noqa: E731
            row = dict(shape=shape, key_mask=masked, rows_per_kv_head=Nq * Hq // Hkv, us=bench(ours))
            with overrides(split_kv="off"):
                row["us_forward_kernels"] = bench(ours)
            with overrides(split_kv="on"):
                row["us_split_kv_forced"] = bench(ours)
            if masked:
                row["us_kvcache_right_padded"] = bench(
                    lambda: torch_flashattn.attention_kvcache(q, kr, vr, cache_seqlens=seqlens, causal=True))
                for name, be in (("efficient", SDPBackend.EFFICIENT_ATTENTION),
                                 ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                    with sdpa_kernel(be):
                        row[f"us_sdpa_{name}"] = bench(lambda: F.scaled_dot_product_attention(q, kx, vx, attn_mask=dense))
            rows.append(row)
            print(json.dumps(row), flush=True)

    cols = [("us_forward_kernels", "forward kernels"), ("us_split_kv_forced", "split-KV forced"),
            ("us_kvcache_right_padded", "attention_kvcache, right-padded"), ("us_sdpa_efficient", "SDPA efficient"),
            ("us_sdpa_cudnn", "SDPA cuDNN")]
    md = [f"A padded batch's decoding step, bf16, {torch.cuda.get_device_name().removeprefix('NVIDIA ')} ({git_commit()}): `attention(q, k, v, causal=True, "
          "causal_align=\"bottom_right\", key_mask=...)` with left-padded keys (and the same call without "
          "key_mask and causal: plain attention), µs per call (do_bench, zero-fill L2 flush); in brackets each time over ours (above 1: "
          "ours is faster). `forward kernels`: the route off (split_kv \"off\"), what ran these calls "
          "before; SDPA gets the padding and the causal diagonal as a boolean mask, K and V repeated over "
          "the group.", "",
          "| shape | key_mask | rows per KV head | ours µs | " + " | ".join(c[1] for c in cols) + " |",
          "| --- | --- | --- | --- | " + " | ".join("---" for _ in cols) + " |"]
    for r in rows:
        cells = []
        for key, _ in cols:
            t = r.get(key)
            cells.append("–" if t is None else f"{t:.1f} ({t / r['us']:.2f}×)")
        md.append(f"| {r['shape']} | {'yes' if r['key_mask'] else 'no'} | {r['rows_per_kv_head']} | {r['us']:.1f} | "
                  + " | ".join(cells) + " |")
    write_rows(args.out, "\n".join(md) + "\n", rows)


if __name__ == "__main__":
    main()
