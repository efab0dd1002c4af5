"""torch_flashattn.parallel.context_parallel_attention on the CPU: 2 and 4 processes over gloo, each
rank's shard against single-process attention over the whole sequence (FlashAttention's rule against
the float64 reference), causal and not, windows (blocks skipped and cut), balanced (zigzag) and not,
GQA, fp32 and bf16; the gradients of the ring's backward against single-process autograd; the layout
helpers and the errors."""
import math
import os
import socket
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import torch_flashattn
from torch_flashattn.parallel import context_parallel_attention, zigzag_shard, zigzag_unshard
from conftest import DEVICES, SLACK, pytorch_same_dtype, reference


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, cases, out_dir):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        for i, (q, k, v, causal, balance, *window) in enumerate(cases):
            if balance:
                qs, ks, vs = (zigzag_shard(t, rank, world) for t in (q, k, v))
            else:
                qs, ks, vs = (t.chunk(world, dim=2)[rank] for t in (q, k, v))
            out = context_parallel_attention(qs, ks, vs, causal=causal, balance=balance,
                                             window=window[0] if window else (-1, -1))
            torch.save(out, os.path.join(out_dir, f"case{i}_rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def run_ranks(world, cases):
    """Every rank's output shard for each case, from `world` gloo processes."""
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_worker, args=(world, _free_port(), cases, out_dir), nprocs=world, join=True)
        return [[torch.load(os.path.join(out_dir, f"case{i}_rank{r}.pt")) for r in range(world)]
                for i in range(len(cases))]


def make(seed, B, Hq, Hkv, N, d, dtype):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, N, d, generator=g).to(dtype) for H in (Hq, Hkv, Hkv)]


@pytest.mark.parametrize("world", [2, 4])
def test_ring_matches_one_process(world):
    cases, meta = [], []
    for dtype in (torch.float32, torch.bfloat16):
        for causal in (False, True):
            for balance in (False, True):
                for Hq, Hkv in ((4, 4), (4, 2)):
                    q, k, v = make(len(cases), 2, Hq, Hkv, 8 * world * 3, 32, dtype)
                    cases.append((q, k, v, causal, balance))
                    meta.append(f"{dtype} causal={causal} balance={balance} Hq/Hkv={Hq}/{Hkv}")
    outs = run_ranks(world, cases)
    for (q, k, v, causal, balance), shards, what in zip(cases, outs, meta):
        out = zigzag_unshard(shards) if balance else torch.cat(shards, dim=2)
        ref = reference(q, k, v, causal)
        pt = pytorch_same_dtype(q, k, v, causal)
        err = (out.double() - ref).abs().max().item()
        err_pt = (pt.double() - ref).abs().max().item()
        assert err <= 2 * err_pt + SLACK[q.dtype], f"world {world} {what}: {err:.3e} vs PyTorch's {err_pt:.3e}"
        # and the same as our own single-process call, up to the merge's rounding
        one = torch_flashattn.attention(q, k, v, causal=causal)
        assert (out.float() - one.float()).abs().max().item() <= 4 * err_pt + SLACK[q.dtype], what


# Windows about the whole sequence's diagonal (N = 24 · world, shards of 24, zigzag chunks of 12):
# inside one chunk, across a neighbour, past several; one-sided either way; with causal.
WINDOWS = [((5, -1), True), ((30, -1), True), ((7, 3), False), ((-1, 2), False), ((0, 0), False),
           ((40, 13), False)]


@pytest.mark.parametrize("world", [2, 4])
def test_ring_window_matches_one_process(world):
    """A window skips the blocks it misses and cuts those it crosses: each rank's shard against the
    float64 reference of the whole sequence, balanced and not, GQA."""
    from test_variants import assert_rule, pytorch_like, variant_reference
    cases, meta = [], []
    for window, causal in WINDOWS:
        for balance in (False, True):
            q, k, v = make(200 + len(cases), 2, 4, 2, 24 * world, 16, torch.float32)
            cases.append((q, k, v, causal, balance, window))
            meta.append(f"window={window} causal={causal} balance={balance}")
    outs = run_ranks(world, cases)
    for (q, k, v, causal, balance, window), shards, what in zip(cases, outs, meta):
        out = zigzag_unshard(shards) if balance else torch.cat(shards, dim=2)
        ref = variant_reference(q, k, v, causal=causal, window=window)[0]
        pt = pytorch_like(q, k, v, causal=causal, window=window)[0]
        assert_rule(out, ref, pt, q.dtype, f"world {world} {what}")
        one = torch_flashattn.attention(q, k, v, causal=causal, window=window)
        assert (out - one).abs().max().item() <= 1e-5, what


def test_zigzag_layout_round_trips():
    x = torch.arange(2 * 3 * 16 * 1, dtype=torch.float32).view(2, 3, 16, 1)
    shards = [zigzag_shard(x, r, 4) for r in range(4)]
    assert torch.equal(shards[0][0, 0, :, 0], torch.tensor([0., 1., 14., 15.]))
    assert torch.equal(zigzag_unshard(shards), x)
    with pytest.raises(ValueError, match="multiple of 2 · world = 8, got 12"):   # an IndexError or uneven shards
        zigzag_shard(x[:, :, :12], 0, 4)


def _grad_worker(rank, world, port, cases, out_dir):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        for i, (q, k, v, g, causal, balance, window) in enumerate(cases):
            shard = (lambda t: zigzag_shard(t, rank, world)) if balance else (lambda t: t.chunk(world, dim=2)[rank])
            qs, ks, vs = (shard(t).clone().requires_grad_(True) for t in (q, k, v))
            (context_parallel_attention(qs, ks, vs, causal=causal, balance=balance, window=window)
             * shard(g)).sum().backward()
            torch.save([qs.grad, ks.grad, vs.grad], os.path.join(out_dir, f"case{i}_rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 4])
def test_ring_gradients_match_one_process(world):
    cases, meta = [], []
    for causal, window in ((False, (-1, -1)), (True, (-1, -1)), (True, (9, -1)), (False, (5, 14))):
        for balance in (False, True):
            for Hq, Hkv in ((4, 4), (4, 2)):
                q, k, v = make(100 + len(cases), 2, Hq, Hkv, 4 * world * 3, 16, torch.float32)
                g = torch.randn(q.shape, generator=torch.Generator().manual_seed(len(cases)))
                cases.append((q, k, v, g, causal, balance, window))
                meta.append(f"causal={causal} window={window} balance={balance} Hq/Hkv={Hq}/{Hkv}")
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_grad_worker, args=(world, _free_port(), cases, out_dir), nprocs=world, join=True)
        grads = [[torch.load(os.path.join(out_dir, f"case{i}_rank{r}.pt")) for r in range(world)]
                 for i in range(len(cases))]
    from test_variants import pytorch_like, variant_reference
    for (q, k, v, g, causal, balance, window), shards, what in zip(cases, grads, meta):
        join = zigzag_unshard if balance else (lambda xs: torch.cat(xs, dim=2))
        ours = [join([s[n] for s in shards]) for n in range(3)]
        ref_in = [t.double().requires_grad_(True) for t in (q, k, v)]
        pt_in = [t.clone().requires_grad_(True) for t in (q, k, v)]
        (variant_reference(*ref_in, causal=causal, window=window)[0] * g.double()).sum().backward()
        (pytorch_like(*pt_in, causal=causal, window=window)[0] * g).sum().backward()
        for name, a, r, p in zip(("dq", "dk", "dv"), ours, ref_in, pt_in):
            err = (a.double() - r.grad).abs().max().item()
            err_pt = (p.grad.double() - r.grad).abs().max().item()
            assert err <= 2 * err_pt + 2e-5, f"world {world} {what}: {name} {err:.3e} vs PyTorch's {err_pt:.3e}"


def _error_worker(rank, world, port, out_dir):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    msgs = []
    try:
        q = torch.randn(1, 2, 4 + rank, 8)                  # rank 1's shard is longer
        try:
            context_parallel_attention(q, q, q)
        except ValueError as e:
            msgs.append(str(e))
        q = torch.randn(1, 2, 5, 8)
        try:
            context_parallel_attention(q, q, q, balance=True)
        except ValueError as e:
            msgs.append(str(e))
        try:
            context_parallel_attention(q, q, q, window=(-2, 3))
        except ValueError as e:
            msgs.append(str(e))
        # Mismatches the ranks once missed (a hang, gloo's abort or a half-received shard): v's head dim,
        # the dtype, the scale.
        for kw in (dict(v=torch.randn(1, 2, 5, 8 + 8 * rank)), dict(dtype=(torch.float32, torch.bfloat16)[rank]),
                   dict(scale=0.5 + rank), dict(v=torch.randn(1, 2, 5, 8).to((torch.float32, torch.bfloat16)[rank]))):
            qq = q.to(kw.get("dtype", torch.float32))
            try:
                context_parallel_attention(qq, qq, kw.get("v", qq), scale=kw.get("scale"))
            except ValueError as e:
                msgs.append(str(e))
        try:                                             # gradients wanted on one rank only
            context_parallel_attention(q.clone().requires_grad_(rank == 0), q, q)
        except ValueError as e:
            msgs.append(str(e))
        # A call every rank refuses leaves no exchange pending: the next call runs (it hung).
        try:
            context_parallel_attention(q, q, q, scale=float("nan"))
        except RuntimeError as e:
            msgs.append(str(e))
        try:                                             # 3-D (its N once read from the head dim)
            context_parallel_attention(q[0], q, q)
        except ValueError as e:
            msgs.append(str(e))
        try:                                             # v's head dim on every rank: the shards' shapes shown
            context_parallel_attention(q, q, torch.randn(1, 2, 5, 16))
        except RuntimeError as e:
            msgs.append(str(e))
        qg = q.clone().requires_grad_()
        out = context_parallel_attention(qg, q, q, causal=True)
        # A first derivative with create_graph=True (it raised from the ring's in-place sums).
        (g,) = torch.autograd.grad(out.pow(2).sum(), qg, create_graph=True)
        msgs.append(tuple(g.shape))
    finally:
        dist.destroy_process_group()
    torch.save(msgs, os.path.join(out_dir, f"rank{rank}.pt"))


def test_errors():
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_error_worker, args=(2, _free_port(), out_dir), nprocs=2, join=True)
        for r in range(2):
            msgs = torch.load(os.path.join(out_dir, f"rank{r}.pt"))
            assert (len(msgs) == 12 and "same shapes" in msgs[0] and "even shard length" in msgs[1]
                    and "window must be (left, right)" in msgs[2]
                    and all("the same causal, window, scale and balance" in m for m in msgs[3:8])
                    and "scale must be a finite number" in msgs[8]
                    and "q must be a 4-D shard (B, H, N, d), got shape (2, 5, 8)" in msgs[9]
                    and "the shards are q (1, 2, 5, 8), k (1, 2, 5, 8), v (1, 2, 5, 16)" in msgs[10]
                    and msgs[11] == (1, 2, 5, 8)), msgs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("balance", [False, True])
@pytest.mark.parametrize("causal,window", [(False, (-1, -1)), (True, (-1, -1)), (True, (70, -1)), (False, (33, 20))])
def test_ring_blocks_and_merge_in_one_process(causal, window, balance, device):
    """The ring's blocks (_pairs) and their lse merge (_merge) on one device, without
    torch.distributed: every rank's queries against every rank's K/V shard as the ring would hand them
    over, in bf16 on the device's kernels, against single-call attention over the whole sequence."""
    from torch_flashattn.parallel import _merge, _op_band, _pairs
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    world, n = 4, 96
    q, k, v = (t.to(device) for t in make(300, 2, 4, 2, world * n, 64, torch.bfloat16))
    left, right = window[0], 0 if causal else window[1]
    shard = (lambda t, r: zigzag_shard(t, r, world)) if balance else (lambda t, r: t.chunk(world, dim=2)[r])
    outs = []
    for rank in range(world):
        qs, acc = shard(q, rank), None
        out = torch.zeros(qs.shape, dtype=torch.float32, device=device)
        lse = torch.full(qs.shape[:3], -math.inf, device=device)
        for step in range(world):
            src = (rank - step) % world
            ks, vs = shard(k, src), shard(v, src)
            for qsl, ksl, bl, br in _pairs(rank, src, world, n, left, right, balance):
                c, wl, wr = _op_band(bl, br)
                o, l = torch_flashattn.attention_lse(qs[:, :, qsl], ks[:, :, ksl], vs[:, :, ksl], causal=c,
                                                     window=(wl, wr))
                out[:, :, qsl], lse[:, :, qsl] = _merge((out[:, :, qsl], lse[:, :, qsl]), (o.float(), l))
        outs.append(out.to(q.dtype))
    ours = zigzag_unshard(outs) if balance else torch.cat(outs, dim=2)
    one = torch_flashattn.attention(q, k, v, causal=causal, window=window)
    ref = reference(q.cpu(), k.cpu(), v.cpu(), causal) if window == (-1, -1) else None
    err = (ours.float() - one.float()).abs().max().item()
    assert err <= 2e-2, f"{device} causal={causal} window={window} balance={balance}: {err:.3e} from one call"
    if ref is not None:
        pt = pytorch_same_dtype(q.cpu(), k.cpu(), v.cpu(), causal)
        err_pt = (pt.double() - ref).abs().max().item()
        assert (ours.double().cpu() - ref).abs().max().item() <= 2 * err_pt + SLACK[q.dtype]
