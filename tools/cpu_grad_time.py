# CPU forward + backward through autograd, torch_flashattn.attention against torch's CPU SDPA in the
# same process (causal and not), over small-model shapes: where does our C backward beat SDPA's?
# torch_flashattn.sdpa.CPU_GRAD_MIN_KEY_ELEMENTS comes from this table.
#
#   python3 -m tools.cpu_grad_time                 # fp32: one line per shape and mask
#   python3 -m tools.cpu_grad_time bf16 fp16       # those dtypes
#   python3 -m tools.cpu_grad_time padded          # causal with every other row's last quarter of keys
#                                                  # padded: our key_mask against SDPA's dense mask
#                                                  # (the transformers backend's training rule), fp32 and bf16
import sys

import torch
import torch.nn.functional as F

import torch_flashattn
from bench.attention import time_cpu

SHAPES = [(16, 4, 64, 16), (32, 4, 32, 32), (16, 4, 96, 32), (16, 4, 128, 16), (16, 4, 64, 64), (8, 4, 128, 64),
          (8, 8, 128, 32), (64, 12, 64, 64), (8, 12, 128, 64), (4, 8, 256, 64), (2, 8, 512, 64), (1, 8, 1024, 64),
          (1, 16, 2048, 64)]


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def main(argv=None):
    torch.manual_seed(0)
    names = (argv if argv is not None else sys.argv[1:]) or ["fp32"]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; ms of forward + backward (median)")
    for name in names:
        if name == "padded":
            for dt in ("fp32", "bf16"):
                run_padded(DTYPES[dt], dt)
        else:
            run(DTYPES[name], name)


PADDED_SHAPES = [(8, 4, 64, 16), (16, 4, 64, 64), (8, 8, 128, 32), (4, 8, 256, 64), (2, 8, 512, 64), (1, 8, 1024, 64)]


def run_padded(dtype, name):
    for B, H, N, d in PADDED_SHAPES:
        q, k, v = (torch.randn(B, H, N, d, dtype=dtype).requires_grad_(True) for _ in range(3))
        g = torch.randn(B, H, N, d, dtype=dtype)
        key_mask = torch.ones(B, N, dtype=torch.bool)
        key_mask[::2, N - N // 4:] = False
        dense = torch.ones(N, N, dtype=torch.bool).tril()[None, None] & key_mask[:, None, None, :]
        ours = lambda: torch.autograd.grad(torch_flashattn.attention(q, k, v, causal=True, key_mask=key_mask),  # noqa: E731
                                           (q, k, v), g)
        sdpa = lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, attn_mask=dense),  # noqa: E731
                                           (q, k, v), g)
        a, b = time_cpu(ours, 0.4), time_cpu(sdpa, 0.4)
        print(f"{name} padded B={B} H={H} N={N} d={d}  key elements {N * d:6d}  fa (key_mask) {a:8.2f}  "
              f"sdpa (dense mask) {b:8.2f}  sdpa/fa {b / a:.2f}", flush=True)


def run(dtype, name):
    for B, H, N, d in SHAPES + ([(64, 4, 16, 16)] if dtype != torch.float32 else []):
        for causal in (True, False):
            q, k, v = (torch.randn(B, H, N, d, dtype=dtype).requires_grad_(True) for _ in range(3))
            g = torch.randn(B, H, N, d, dtype=dtype)
            ours = lambda: torch.autograd.grad(torch_flashattn.attention(q, k, v, causal=causal), (q, k, v), g)  # noqa: E731
            sdpa = lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=causal),  # noqa: E731
                                               (q, k, v), g)
            a, b = time_cpu(ours, 0.4), time_cpu(sdpa, 0.4)
            print(f"{name} B={B} H={H} N={N} d={d} causal={int(causal)}  key elements {N * d:6d}  "
                  f"fa {a:8.2f}  sdpa {b:8.2f}  sdpa/fa {b / a:.2f}", flush=True)


if __name__ == "__main__":
    main()
