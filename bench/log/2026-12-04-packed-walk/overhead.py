"""Where packed sequences lose against the dense kernel on the same work: equal lengths, timed call by
call in turn (bench.attention.time_interleaved), bf16, H = 16, q/k/v as (B·N, H, d) rows:
  dense     torch_flashattn.attention on (B, N, H, d) views of those rows (the plain kernel);
  key_mask  the same with an all-true key_mask (the visibility variants' kernel, FA_VAR_MASKS);
  packed    attention_varlen over the B sequences (the same kernel, two tiles per CTA);
  fa3, fa3-varlen  FlashAttention-3's forward on the same rows, where importable.
One JSON line per point, TFLOP/s."""
import json
import sys

import torch

import torch_flashattn
from bench.attention import time_interleaved


def main():
    budget = float(sys.argv[1]) if len(sys.argv) > 1 else 0.3
    H = 16
    try:
        from fa3_fwd_interface import flash_attn_func as fa3, flash_attn_varlen_func as fa3v
    except ImportError:
        fa3 = fa3v = None
    for d in (128, 64):
        for B, N in ((8, 2560), (4, 4096), (16, 1024)):
            for causal in (False, True):
                g = torch.Generator(device="cuda").manual_seed(0)
                q, k, v = (torch.randn(B * N, H, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
                qb, kb, vb = (x.view(B, N, H, d).transpose(1, 2) for x in (q, k, v))   # (B, H, N, d) views
                cu = torch.arange(0, B * N + 1, N, dtype=torch.int32, device="cuda")
                km = torch.ones(B, N, dtype=torch.bool, device="cuda")
                fns = {"dense": lambda: torch_flashattn.attention(qb, kb, vb, causal=causal),
                       "key_mask": lambda: torch_flashattn.attention(qb, kb, vb, causal=causal, key_mask=km),
                       "packed": lambda: torch_flashattn.attention_varlen(q, k, v, cu, cu, N, N, causal=causal)}
                if fa3 is not None:
                    q4, k4, v4 = (x.view(B, N, H, d) for x in (q, k, v))
                    fns["fa3"] = lambda: fa3(q4, k4, v4, causal=causal)
                    fns["fa3-varlen"] = lambda: fa3v(q, k, v, cu, cu, N, N, causal=causal)
                ref = fns["dense"]().transpose(1, 2).reshape(B * N, H, d)
                same = {n: bool(torch.equal(ref, fns[n]().transpose(1, 2).reshape(B * N, H, d) if n == "key_mask"
                                            else fns[n]())) for n in ("key_mask", "packed")}
                ms = time_interleaved(list(fns.values()), budget)
                fl = 4.0 * d * H * B * (N * (N + 1) // 2 if causal else N * N)
                row = {"d": d, "B": B, "N": N, "causal": causal, "same_bits_as_dense": same}
                row.update({n: round(fl / (t * 1e-3) / 1e12, 1) for n, t in zip(fns, ms)})
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
