"""The torch op's integration: opcheck, torch.compile, views without copies,
the build, and CUDA streams."""
import os
import shutil

import pytest
import torch

import torch_flashattn
from conftest import DEVICES, assert_accurate, randn


def test_version():
    assert isinstance(torch_flashattn.__version__, str) and torch_flashattn.__version__.count(".") == 2


def test_cuda_built_when_nvcc_present():
    """A machine with nvcc must get the CUDA kernels (FA_BUILD_CUDA=0 opts out)."""
    from torch.utils.cpp_extension import CUDA_HOME
    if os.environ.get("FA_BUILD_CUDA") == "0":
        pytest.skip("CUDA build disabled by FA_BUILD_CUDA=0")
    if shutil.which("nvcc") is None and CUDA_HOME is None:
        pytest.skip("no nvcc on this machine")
    assert torch_flashattn.has_cuda_kernels(), "nvcc is present but the extension was built without CUDA"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_opcheck(device, dtype):
    q = randn(2, 4, 33, 64, dtype=dtype, device=device)
    k = randn(2, 2, 47, 64, dtype=dtype, device=device)
    v = randn(2, 2, 47, 64, dtype=dtype, device=device)
    for op in (torch.ops.fa.forward.default, torch.ops.fa.forward_lse.default):
        torch.library.opcheck(op, (q, k, v), {"scale": 0.2, "causal": True})
        torch.library.opcheck(op, (q, k, v))


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph(device):
    def block(x, wq, wk, wv):
        B, N, _ = x.shape
        q = (x @ wq).view(B, N, 4, 32).transpose(1, 2)
        k = (x @ wk).view(B, N, 2, 32).transpose(1, 2)
        v = (x @ wv).view(B, N, 2, 32).transpose(1, 2)
        out = torch_flashattn.attention(q, k, v, causal=True)
        return out.transpose(1, 2).reshape(B, N, 128).relu()

    torch.manual_seed(4)
    x = randn(2, 50, 128, device=device)
    w = [randn(128, n, device=device) / 11 for n in (128, 64, 64)]
    compiled = torch.compile(block, fullgraph=True)
    torch.testing.assert_close(compiled(x, *w), block(x, *w))


@pytest.mark.parametrize("device", DEVICES)
def test_views_are_not_copied(device):
    """A (B, N, H, d) buffer seen as (B, H, N, d) runs in place; a strided last
    dim is the one case that is copied."""
    x = randn(2, 64, 3 * 4, 32, device=device)
    q, k, v = (t.transpose(1, 2) for t in x.split(4, dim=2))

    def copies(*args):
        with torch.profiler.profile() as prof:
            torch_flashattn.attention(*args)
        return [e.name for e in prof.events() if e.name in ("aten::copy_", "aten::clone", "aten::contiguous")]

    assert copies(q, k, v) == []
    assert "aten::copy_" in copies(q, k, randn(2, 4, 64, 64, device=device)[..., ::2])


@pytest.mark.gpu
def test_non_default_stream():
    """Work is ordered on the current stream: inputs written on a side stream
    and read there, output checked after that stream alone."""
    torch.manual_seed(5)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        q, k, v = (randn(2, 4, 300, 64, dtype=torch.bfloat16, device="cuda") for _ in range(3))
        out = torch_flashattn.attention(q, k, v, causal=True)
    s.synchronize()
    assert_accurate(out, q, k, v, causal=True, what="side stream")


@pytest.mark.gpu
def test_cuda_matches_cpu_backend():
    torch.manual_seed(6)
    q, k, v = (randn(1, 2, 129, 80) for _ in range(3))
    cpu = torch_flashattn.attention(q, k, v, causal=True)
    gpu = torch_flashattn.attention(q.cuda(), k.cuda(), v.cuda(), causal=True).cpu()
    torch.testing.assert_close(gpu, cpu, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_inference_calls_skip_the_python_autograd_wrapper(device, mode):
    """Outside grad mode every forward op is dispatched below the autograd key (torch_flashattn._autograd.call):
    no Python frame of torch's autograd registration runs, and the results equal the grad-mode calls'."""
    import sys
    torch.manual_seed(8)
    q, k, v = (randn(2, 4, 33, 16, device=device) for _ in range(3))
    cu = torch.tensor([0, 10, 33], dtype=torch.int32, device=device)
    packed = [t[0].transpose(0, 1).contiguous() for t in (q, k, v)]
    calls = {
        "attention": lambda: torch_flashattn.attention(q, k, v, causal=True),
        "attention_lse": lambda: torch_flashattn.attention_lse(q, k, v)[1],
        "variants": lambda: torch_flashattn.attention(q, k, v, window=(5, 2)),
        "varlen": lambda: torch_flashattn.attention_varlen(*packed, cu, cu, 23, 23, causal=True),
        "drop-in": lambda: torch_flashattn.scaled_dot_product_attention(q, k, v, is_causal=True),
    }
    frames = []

    def profile(frame, event, arg):
        if event == "call" and "torch/_library/autograd" in frame.f_code.co_filename.replace(os.sep, "/"):
            frames.append(frame.f_code.co_name)

    for name, fn in calls.items():
        want = fn()
        with torch.no_grad() if mode == "no_grad" else torch.inference_mode():
            sys.setprofile(profile)
            try:
                got = fn()
            finally:
                sys.setprofile(None)
        assert frames == [], f"{name}: the autograd wrapper ran under {mode}: {frames}"
        assert not got.requires_grad and torch.equal(got, want), name
