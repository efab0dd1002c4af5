"""Packed sequences against FlashAttention-3 (when importable; ../shared/peers/ stages it) and our dense
kernel on the same tokens: 8 sequences of 1k-4k in ascending and descending order, 8 of 2560 and 4 of
4096 (there also dense, on (B, N, H, d) views and on (B, H, N, d) copies), causal and not. bf16, d = 128,
H = 16; one JSON line per point (TFLOP/s over the visible pairs).

    python3 -m tools.sm90.varlen > varlen.jsonl
"""
import json

import torch
import triton

import torch_flashattn

try:
    from fa3_fwd_interface import flash_attn_varlen_func as fa3_varlen, flash_attn_func as fa3_dense
except ImportError:
    fa3_varlen = fa3_dense = None

H, d = 16, 128


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median")


def run(lengths, causal, tag):
    g = torch.Generator(device="cuda").manual_seed(0)
    T = sum(lengths)
    q, k, v = (torch.randn(T, H, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    cu = torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    n = max(lengths)
    flops = 4.0 * d * H * sum(L * (L + 1) // 2 if causal else L * L for L in lengths)
    r = {"tag": tag, "causal": causal, "lengths": lengths}
    r["fa"] = flops / bench(lambda: torch_flashattn.attention_varlen(q, k, v, cu, cu, n, n, causal=causal)) / 1e9
    if fa3_varlen:
        r["fa3"] = flops / bench(lambda: fa3_varlen(q, k, v, cu, cu, n, n, causal=causal)) / 1e9
    if len(set(lengths)) == 1:
        B, L = len(lengths), lengths[0]
        qb, kb, vb = (x.view(B, L, H, d) for x in (q, k, v))
        r["fa dense bshd"] = flops / bench(lambda: torch_flashattn.attention(
            qb.transpose(1, 2), kb.transpose(1, 2), vb.transpose(1, 2), causal=causal)) / 1e9
        qh, kh, vh = (x.transpose(1, 2).contiguous() for x in (qb, kb, vb))
        r["fa dense bhsd"] = flops / bench(lambda: torch_flashattn.attention(qh, kh, vh, causal=causal)) / 1e9
        if fa3_dense:
            r["fa3 dense"] = flops / bench(lambda: fa3_dense(qb, kb, vb, causal=causal)) / 1e9
    print(json.dumps({k: (round(v, 1) if isinstance(v, float) else v) for k, v in r.items()}), flush=True)


def main():
    asc = [int(4096 * (0.25 + 0.75 * b / 7)) for b in range(8)]
    for causal in (False, True):
        run(asc, causal, "asc")
        run(asc[::-1], causal, "desc")
        run([2560] * 8, causal, "uniform")
        run([4096] * 4, causal, "uniform4k")


if __name__ == "__main__":
    main()
