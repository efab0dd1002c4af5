"""Wave quantization of the Hopper kernel's persistent grid (csrc/cuda/sm90.cu): d = 128, non-causal,
bf16, the same N at head counts whose tiles fill the grid's last round well or badly, fa against
SDPA's cuDNN backend timed call by call in turn (bench.attention.time_interleaved). On the GPU
machine, after the build:

    python3 -m tools.sm90.quant

The d = 128 non-causal three-consumer tile (BM = 192 rows; from 8k keys, forced here at every
shape with overrides(sm90_long_tile="on")) runs on a persistent grid (one CTA per SM) that hands
each CTA every grid-th tile, so a call takes ceil(tiles / SMs) rounds of tiles. model_eff: the
rows that are real (N / 192 tiles per head) over the rows the rounds could compute; the time would
scale as 1 / model_eff if nothing else changed from one head count to the next. `whole`: the same
call under overrides(sm90_tail=1) (the last round's tiles not split along the keys).

    python3 -m tools.sm90.quant --parts 2 3 4

adds a column per forced part count (overrides(sm90_tail=s)) and, for each, what the split cost beyond the
round model: the model's time is whole · (R + ceil(t·s / SMs) / s) / (R + 1) for t tiles in the last
round; `cost` is the excess in rounds times Nk per part, the coefficient sm90_walk_plan charges (7).
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench.attention import time_interleaved

SHAPES = [(1, 16, 16384), (1, 66, 16384), (1, 17, 16384), (1, 22, 16384), (2, 16, 8192), (2, 18, 8192),
          (4, 16, 4096), (4, 18, 4096), (4, 17, 4096)]


def main():
    ap = argparse.ArgumentParser(prog="python3 -m tools.sm90.quant", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", type=int, nargs="*", default=[], choices=[2, 3, 4],
                    help="also time the last round forced into this many parts")
    args = ap.parse_args()
    import torch_flashattn  # noqa: F401  (torch.ops.fa)
    from torch_flashattn._testing import overrides
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print("SMs", sms)
    d = 128
    with overrides(sm90_long_tile="on"):              # the tile the split rule serves, at every shape
        for B, H, N in SHAPES:
            q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))

            def fa():
                return torch.ops.fa.forward(q, k, v)

            def whole():
                with overrides(sm90_tail=1):
                    return torch.ops.fa.forward(q, k, v)

            def cudnn():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    return F.scaled_dot_product_attention(q, k, v)

            def forced(parts):
                def f():
                    with overrides(sm90_tail=parts):
                        return torch.ops.fa.forward(q, k, v)
                return f
            extra = [forced(s) for s in args.parts]
            err = max((f().float() - cudnn().float()).abs().max().item() for f in [fa, whole] + extra)
            t_fa, t_whole, t_cu, *t_extra = time_interleaved([fa, whole, cudnn] + extra, 0.3, "zero")
            flop = 4 * B * H * N * N * d
            tiles = B * H * -(-N // 192)
            rounds = -(-tiles // sms)
            eff = B * H * (N / 192) / (rounds * sms)
            cols = ""
            R, t = tiles // sms, tiles % sms
            for s, t_s in zip(args.parts, t_extra):
                cols += f" s={s} {flop / t_s / 1e9:6.1f}"
                if t and R:
                    round_t = t_whole / (R + 1)
                    model = round_t * (R + -(-t * s // sms) / s)
                    cols += f" (cost {(t_s - model) / round_t * N / (t * s):5.1f})"
            print(f"B={B} H={H:3d} N={N:6d} tiles={tiles:5d} rounds={tiles / sms:6.2f}->{rounds:3d} model_eff={eff:.3f} "
                  f"fa {flop / t_fa / 1e9:6.1f} whole {flop / t_whole / 1e9:6.1f} cudnn {flop / t_cu / 1e9:6.1f} TFLOP/s fa/cudnn {t_cu / t_fa:.3f}"
                  f"{cols} |fa-cudnn| {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
