# Accuracy over a very long run of keys: 3 queries against 2^25 + 1000 keys (one head, d = 64), the
# shape of tests/test_extreme.py::test_keys_over_2g_elements, for each kernel family and each SDPA
# backend, against a float64 reference. Prints the max error and the mean of out·ref / ref·ref
# (1.0 when unbiased; below 1 when the sum over the keys is truncated towards zero).
#
#   python3 -m tools.long_keys [--nk 33555432] [--dtype bf16]
import argparse
import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def reference(q, k, v, chunk=2 ** 22):
    """float64 softmax(q kᵀ / sqrt(d)) v over key chunks, with a running max."""
    qd = q[0, 0].double()
    m = torch.full((qd.shape[0],), -math.inf, dtype=torch.float64, device=q.device)
    l = torch.zeros_like(m)
    acc = torch.zeros(qd.shape[0], q.shape[-1], dtype=torch.float64, device=q.device)
    for j in range(0, k.shape[2], chunk):
        s = qd @ k[0, 0, j:j + chunk].double().T / math.sqrt(q.shape[-1])
        m_new = torch.maximum(m, s.max(-1).values)
        p, alpha = torch.exp(s - m_new[:, None]), torch.exp(m - m_new)
        l = l * alpha + p.sum(-1)
        acc = acc * alpha[:, None] + p @ v[0, 0, j:j + chunk].double()
        m = m_new
    return acc / l[:, None]


def main():
    ap = argparse.ArgumentParser(prog="python3 -m tools.long_keys",
                                 description="accuracy over 2^25 + 1000 keys, every family and SDPA backend")
    ap.add_argument("--nk", type=int, default=2 ** 25 + 1000)
    ap.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    args = ap.parse_args()
    import torch_flashattn
    from torch_flashattn._testing import overrides
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    torch.manual_seed(14)
    q = torch.randn(1, 1, 3, 64, dtype=dtype, device="cuda")
    k, v = (torch.randn(1, 1, args.nk, 64, dtype=dtype, device="cuda") for _ in range(2))
    ref = reference(q, k, v)
    print(f"3 queries x {args.nk} keys, d = 64, {dtype}; |ref| max {ref.abs().max().item():.3e}")

    def report(name, fn):
        try:
            out = fn()[0, 0].double()
        except RuntimeError as e:
            print(f"  {name:16} n/a: {' '.join(str(e).split())[:100]}")
            return
        torch.cuda.synchronize()
        t = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t[0].record()
        fn()
        t[1].record()
        torch.cuda.synchronize()
        err = (out - ref).abs().max().item()
        ratio = ((out * ref).sum() / (ref * ref).sum()).item()
        print(f"  {name:16} max err {err:.3e}  out·ref/ref·ref {ratio:.4f}  {t[0].elapsed_time(t[1]):8.2f} ms")

    for family in ("auto", "sm90", "sm80", "simt"):
        def fa(family=family):
            with overrides(family=family):
                return torch_flashattn.attention(q, k, v)
        report(f"fa {family}", fa)
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                    SDPBackend.MATH):
        def sdpa(backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v)
        report(f"sdpa {backend.name.lower().replace('_attention', '')}", sdpa)


if __name__ == "__main__":
    main()
