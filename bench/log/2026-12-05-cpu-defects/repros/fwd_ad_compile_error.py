# Forward-mode AD through a compiled torch_flashattn.attention: eager raises a message naming the op;
# compiled (any backend) raises an unrelated TypeError from deep inside dynamo.
import torch, torch_flashattn as fa
import torch.autograd.forward_ad as fwad
torch.set_num_threads(1)
q, k, v, t = (torch.randn(1, 1, 16, 8) for _ in range(4))
f = lambda q: fa.attention(q, k, v, causal=True)
for name, fn in (("eager", f), ("compiled", torch.compile(f, backend="eager"))):
    try:
        with fwad.dual_level():
            fn(fwad.make_dual(q, t))
    except Exception as e:
        print(f"{name}: {type(e).__name__}: {str(e).splitlines()[0]}")
