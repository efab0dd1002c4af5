"""Execution context on CUDA, for fa.forward and fa.forward_lse and every CUDA kernel family:
stream ordering, CUDA graph capture and replay, torch.compile (max-autotune-no-cudagraphs and
reduce-overhead, which replays through CUDA graphs), a second GPU, bitwise determinism and the
absence of host synchronization. (test_op.py has the basic side-stream and fullgraph tests.)
"""
import time

import pytest
import torch

import torch_flashattn
from conftest import assert_accurate, use_kernel

pytestmark = pytest.mark.gpu
CUDA_KERNELS = ["cuda", "cuda-sm80", "cuda-fp32", "cuda-simt"]
DTYPES = [torch.float32, torch.bfloat16]


def inputs(dtype, device="cuda", B=2, Hq=4, Hkv=2, Nq=300, Nk=257, d=64):
    return (torch.randn(B, Hq, Nq, d, dtype=dtype, device=device),
            torch.randn(B, Hkv, Nk, d, dtype=dtype, device=device),
            torch.randn(B, Hkv, Nk, d, dtype=dtype, device=device))


def sleep_ms(ms):
    """Keeps the current stream busy for about `ms` milliseconds (torch.cuda._sleep spins for a
    number of GPU clock cycles; 2 GHz is an upper bound for current GPUs' clocks)."""
    torch.cuda._sleep(int(ms * 2e6))


@pytest.mark.parametrize("kernel", CUDA_KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_side_stream_ordering(kernel, dtype, fa_overrides):
    """The op runs on the current stream, after the work queued before it there. A side stream
    is kept busy, then q is overwritten on it and the op called: an op launched on any other
    stream would read the old q."""
    use_kernel(kernel, dtype, fa_overrides)
    torch.manual_seed(31)
    q_old, k, v = inputs(dtype)
    q_new = torch.randn_like(q_old)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        q = q_old.clone()
        sleep_ms(50)
        q.copy_(q_new)
        out = torch_flashattn.attention(q, k, v, causal=True)
        out2, lse = torch_flashattn.attention_lse(q, k, v, causal=True)
    s.synchronize()
    assert_accurate(out, q_new, k, v, causal=True, what="side stream")
    assert torch.equal(out2, out)
    assert torch.equal(lse, torch_flashattn.attention_lse(q_new, k, v, causal=True)[1])


@pytest.mark.parametrize("kernel", CUDA_KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_graph_replay(kernel, dtype, fa_overrides):
    """Captured into a CUDA graph with static inputs and replayed after new inputs are copied in:
    the same bits as an eager call on those inputs."""
    use_kernel(kernel, dtype, fa_overrides)
    torch.manual_seed(32)
    q, k, v = inputs(dtype)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):                      # warm-up outside the capture, as torch asks
        for _ in range(2):
            torch.ops.fa.forward(q, k, v, None, True)
            torch.ops.fa.forward_lse(q, k, v, 0.3, False)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = torch.ops.fa.forward(q, k, v, None, True)
        out_lse, lse = torch.ops.fa.forward_lse(q, k, v, 0.3, False)
    for step in range(3):
        new = inputs(dtype)
        for static, fresh in zip((q, k, v), new):
            static.copy_(fresh)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, torch.ops.fa.forward(*new, None, True)), f"replay {step}: forward"
        eager_out, eager_lse = torch.ops.fa.forward_lse(*new, 0.3, False)
        assert torch.equal(out_lse, eager_out) and torch.equal(lse, eager_lse), f"replay {step}: forward_lse"
    assert_accurate(out, *new, causal=True, what="graph replay")


@pytest.mark.parametrize("mode", ["max-autotune-no-cudagraphs", "reduce-overhead"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_compile_modes(mode, dtype):
    """torch.compile(fullgraph=True) in the modes that reorder work around custom ops
    (max-autotune) and that capture them in CUDA graphs (reduce-overhead), with forward and
    forward_lse, called several times with new inputs (reduce-overhead records, then replays)."""
    def f(q, k, v):
        out = torch.ops.fa.forward(q * 0.5, k, v, None, True)
        out2, lse = torch.ops.fa.forward_lse(q, k, v, 0.2, False)
        return out.relu() + out2, lse.exp()

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True, mode=mode)
    torch.manual_seed(33)
    for _ in range(4):
        q, k, v = inputs(dtype, Nq=200, Nk=200)
        got = compiled(q, k, v)
        want = f(q, k, v)
        got = [t.clone() for t in got]            # reduce-overhead reuses its output buffers
        torch.testing.assert_close(got[0], want[0], atol=0, rtol=0)
        torch.testing.assert_close(got[1], want[1], rtol=1e-6, atol=0)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs a second GPU")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_second_gpu(dtype):
    """Inputs on cuda:1 while cuda:0 is current: the op runs on cuda:1 (device guard, cuda:1's
    current stream) and returns there."""
    torch.manual_seed(34)
    assert torch.cuda.current_device() == 0
    q, k, v = inputs(dtype, device="cuda:1")
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=True)
    assert out.device == lse.device == torch.device("cuda:1")
    assert torch.cuda.current_device() == 0
    assert_accurate(out, q, k, v, causal=True, what="cuda:1")
    with torch.cuda.device(1):
        assert torch.equal(out, torch_flashattn.attention(q, k, v, causal=True))


@pytest.mark.parametrize("kernel", CUDA_KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_deterministic(kernel, dtype, causal, fa_overrides):
    """The same inputs give the same bits, call after call (no atomics, no split-K reduction
    whose order depends on scheduling)."""
    use_kernel(kernel, dtype, fa_overrides)
    torch.manual_seed(35)
    q, k, v = inputs(dtype, B=3, Hq=8, Hkv=2, Nq=1000, Nk=1031, d=128)
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal)
    for _ in range(3):
        out2, lse2 = torch_flashattn.attention_lse(q, k, v, causal=causal)
        assert torch.equal(out, out2) and torch.equal(lse, lse2)
        assert torch.equal(out, torch_flashattn.attention(q, k, v, causal=causal))


@pytest.mark.parametrize("kernel", CUDA_KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_no_host_sync(kernel, dtype, fa_overrides):
    """The op never waits for the GPU.

    1. torch.cuda.set_sync_debug_mode("error") raises on the synchronizing calls that go through
       torch (.item(), D2H copies, torch.cuda.synchronize, ...). It does not see CUDA runtime
       calls the extension makes itself; cudaGetDevice, cudaDeviceGetAttribute and
       cudaFuncSetAttribute, which the launchers call, do not synchronize anyway.
    2. So also: with the stream kept busy for 200 ms, the call must return long before that; any
       synchronization, torch's or the extension's own, would wait for the busy stream."""
    use_kernel(kernel, dtype, fa_overrides)
    torch.manual_seed(36)
    q, k, v = inputs(dtype)
    torch_flashattn.attention_lse(q, k, v, causal=True)     # first-call setup (module load, smem opt-in)
    torch.cuda.synchronize()
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = torch.ops.fa.forward(q, k, v, None, True)
        out_lse, lse = torch.ops.fa.forward_lse(q, k, v, None, True)
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    sleep_ms(200)
    t0 = time.perf_counter()
    out2, lse2 = torch.ops.fa.forward_lse(q, k, v, None, True)
    elapsed = time.perf_counter() - t0
    torch.cuda.synchronize()
    assert elapsed < 0.05, f"the call took {elapsed * 1e3:.0f} ms behind a 200 ms busy stream: it synchronized"
    assert torch.equal(out, out_lse) and torch.equal(out2, out) and torch.equal(lse2, lse)
