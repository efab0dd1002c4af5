"""Context parallelism: one attention call over a sequence split across the ranks of a
torch.distributed group (ring attention).

Each rank holds a contiguous shard of the sequence (dim 2 of (B, H, N, d)) of q, k and v, shards in
rank order. The K/V shards travel round the ring by point-to-point messages (batch_isend_irecv; NCCL
on GPUs, gloo on CPUs); while the next shard is in flight, the rank attends its queries to the shard
it holds with torch_flashattn.attention_lse, and the partial results merge in fp32 by their
log-sum-exp. Ranks skip the shards their queries cannot see (causal, a window), and cut a block the
window crosses to the rows and keys it reaches. balance=True takes the head-tail
("zigzag") layout: the sequence is cut into 2W chunks and rank r holds chunks r and 2W − 1 − r, so
every rank has the same causal work. The backward pass is a second ring through fa::backward.

PyTorch's own ``torch.distributed.tensor.experimental.context_parallel`` does not reach this op: it
turns SDPA's inputs into DTensors and maps only aten's three SDPA backend ops
(``_scaled_dot_product_{flash,efficient,cudnn}_attention`` and their backwards) to its ring, through
DTensor's private custom-op handler table (``_context_parallel/_attention.py`` in torch 2.14). Adding
this op there would mean writing to that private table and calling its private templated ring, both of
which change between releases, so this module keeps its own ring on public torch.distributed calls.
"""
import math
import struct

import torch
import torch.distributed as dist

import torch_flashattn

__all__ = ["context_parallel_attention", "zigzag_shard", "zigzag_unshard"]


def zigzag_shard(x, rank, world, dim=2):
    """The balance=True layout of a full sequence: chunks rank and 2·world − 1 − rank of 2·world
    (the length a multiple of 2·world)."""
    if x.shape[dim] % (2 * world):
        raise ValueError(f"zigzag_shard: the sequence length must be a multiple of 2 · world = {2 * world}, "
                         f"got {x.shape[dim]}")
    chunks = x.chunk(2 * world, dim=dim)
    return torch.cat([chunks[rank], chunks[2 * world - 1 - rank]], dim=dim)


def zigzag_unshard(shards, dim=2):
    """The full sequence from every rank's balance=True shard (rank order)."""
    world = len(shards)
    halves = [s.chunk(2, dim=dim) for s in shards]
    return torch.cat([halves[r][0] for r in range(world)] + [halves[r][1] for r in reversed(range(world))], dim=dim)


def _merge(acc, part):
    """(out, lse) pairs over disjoint key sets merged by their lse, in fp32; None is empty."""
    if acc is None:
        return part
    (o1, l1), (o2, l2) = acc, part
    m = torch.maximum(l1, l2)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))   # both −inf: weights 0, not NaN
    w1, w2 = torch.exp(l1 - m), torch.exp(l2 - m)
    total = w1 + w2
    safe = torch.where(total > 0, total, torch.ones_like(total))
    out = (o1 * (w1 / safe).unsqueeze(-1) + o2 * (w2 / safe).unsqueeze(-1))
    lse = torch.where(total > 0, m + torch.log(safe), torch.full_like(m, -math.inf))
    return out, lse


def _band(delta, m, left, right):
    """A block of m queries and m keys whose queries start delta positions after its keys (global
    positions), under the band key ≥ query − left and key ≤ query + right (−1: that side unbounded):
    (q0, q1, k0, k1, left', right'), the rows and keys of the block some query sees and the band in
    their own positions (top-left), or None when no query sees a key. Where the band misses the
    block's diagonal, the rows and keys are cut so that it meets theirs."""
    a = delta - left if left >= 0 else -math.inf          # key j visible to query i: i + a <= j <= i + b
    b = delta + right if right >= 0 else math.inf
    if a > m - 1 or b < 1 - m:
        return None
    q0, q1, k0, k1 = 0, m, 0, m
    if a > 0:                                            # keys after the diagonal only
        q1, k0, b, a = m - a, a, b - a, 0
    elif b < 0:                                          # keys before the diagonal only
        q0, k1, a, b = -b, m + b, a - b, 0
    side = lambda x: -1 if math.isinf(x) or abs(x) >= m else int(abs(x))  # noqa: E731
    return q0, q1, k0, k1, side(a), side(b)


def _pairs(rank, src, world, n, left, right, balance):
    """The (query slice, key slice, left, right) blocks this rank computes against rank src's K/V
    shard: slices of the shard's length n and the band (window, causal as right = 0) in the block's own
    positions; blocks the band misses are skipped, blocks it cuts are cut to the part it reaches."""
    if balance:                                          # chunks of n / 2: (start in the shard, global index)
        h = n // 2
        qc, kc = ((0, rank), (h, 2 * world - 1 - rank)), ((0, src), (h, 2 * world - 1 - src))
    else:
        h, qc, kc = n, ((0, rank),), ((0, src),)
    blocks = []
    for qs, qi in qc:
        for ks, ki in kc:
            band = _band((qi - ki) * h, h, left, right)
            if band is not None:
                q0, q1, k0, k1, bl, br = band
                blocks.append((slice(qs + q0, qs + q1), slice(ks + k0, ks + k1), bl, br))
    return blocks


def _op_band(bl, br):
    """attention_lse's / fa::backward's arguments for a block's band: causal where it is one."""
    return (True, -1, -1) if (bl, br) == (-1, 0) else (False, bl, br)


def _ring_forward(q, k, v, left, right, scale, group, balance):
    """(out fp32, lse) of this rank's queries over every rank's K/V, the shards passed round the ring."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    n = q.shape[2]
    out = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    lse = torch.full(q.shape[:3], -math.inf, dtype=torch.float32, device=q.device)
    kv = torch.stack([k, v]).contiguous()               # one message per step
    for step in range(world):
        src = (rank - step) % world                     # whose K/V this rank holds now
        reqs, nxt_kv = [], None
        if step < world - 1:                            # the next shard travels while this one is used
            nxt_kv = torch.empty_like(kv)
            reqs = _exchange(group, [kv], [nxt_kv])
        for qs, ks, bl, br in _pairs(rank, src, world, n, left, right, balance):
            c, wl, wr = _op_band(bl, br)
            o, l = torch_flashattn.attention_lse(q[:, :, qs], kv[0][:, :, ks], kv[1][:, :, ks], causal=c,
                                                 window=(wl, wr), scale=scale)
            out[:, :, qs], lse[:, :, qs] = _merge((out[:, :, qs], lse[:, :, qs]), (o.float(), l))
        for r in reqs:
            r.wait()
        if nxt_kv is not None:
            kv = nxt_kv
    return out, lse


def _ring_backward(dout, q, k, v, out, lse, left, right, scale, group, balance):
    """dq, dk, dv of this rank's shards: each K/V shard goes round the ring with its dK/dV sums, and
    the sums end at the shard's owner. D = rowsum(dO ∘ O) of the whole row is given to fa::backward,
    since each block holds only some of the row's keys."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    n = q.shape[2]
    D = (dout.float() * out).sum(-1)
    out_q = out.to(q.dtype)
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    kv = torch.stack([k, v]).contiguous()
    dkv = torch.zeros((2,) + k.shape, dtype=torch.float32, device=k.device)
    for step in range(world):
        src = (rank - step) % world
        reqs, nxt_kv = [], None
        if step < world - 1:
            nxt_kv = torch.empty_like(kv)
            reqs = _exchange(group, [kv], [nxt_kv])
        for qs, ks, bl, br in _pairs(rank, src, world, n, left, right, balance):
            c, wl, wr = _op_band(bl, br)
            gq, gk, gv, _ = torch.ops.fa.backward(
                dout[:, :, qs].contiguous(), q[:, :, qs], kv[0][:, :, ks], kv[1][:, :, ks], out_q[:, :, qs],
                lse[:, :, qs].contiguous(), None, scale, c, window_left=wl, window_right=wr,
                delta=D[:, :, qs].contiguous())
            dq[:, :, qs] += gq.float()
            dkv[0][:, :, ks] += gk.float()
            dkv[1][:, :, ks] += gv.float()
        for r in reqs:
            r.wait()
        # The sums travel with their shard; after the last step they reach its owner.
        if world > 1:
            nxt_dkv = torch.empty_like(dkv)
            for r in _exchange(group, [dkv], [nxt_dkv]):
                r.wait()
            dkv = nxt_dkv
        if nxt_kv is not None:
            kv = nxt_kv
    return dq.to(q.dtype), dkv[0].to(k.dtype), dkv[1].to(v.dtype)


def _exchange(group, sends, recvs):
    """Send to the next rank and receive from the previous one, all at once."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    if group is not None:
        nxt, prv = dist.get_global_rank(group, nxt), dist.get_global_rank(group, prv)
    ops = [dist.P2POp(dist.isend, t, nxt, group) for t in sends] + [dist.P2POp(dist.irecv, t, prv, group) for t in recvs]
    return dist.batch_isend_irecv(ops)


class _Ring(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, left, right, scale, group, balance):
        out, lse = _ring_forward(q, k, v, left, right, scale, group, balance)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.args = (left, right, scale, group, balance)
        return out.to(q.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = _ring_backward(dout.contiguous(), q, k, v, out, lse, *ctx.args)
        return dq, dk, dv, None, None, None, None, None


def context_parallel_attention(q, k, v, *, causal=False, scale=None, window=(-1, -1), group=None, balance=False):
    """This rank's output shard of attention over the whole sequence, the same as single-device
    ``torch_flashattn.attention`` over the concatenated shards (with ``causal`` and ``window`` about the
    whole sequence's diagonal).

    Args:
        q: (B, Hq, n, d) this rank's query shard; k, v: (B, Hkv, n, d) its key/value shards. Every
            rank's shards have the same shapes (n the same on every rank; with balance, n even).
        causal: causal over the whole sequence (global positions).
        scale: as in attention; default 1/sqrt(d).
        window: (left, right) as in attention, about the whole sequence's diagonal (−1: unbounded);
            blocks outside it are skipped, the ranks' K/V shards still travel the whole ring.
        group: the process group (default: the world).
        balance: the shards are in the zigzag layout (zigzag_shard), for even causal work.

    Differentiable: the backward pass is a second ring (dK, dV travel with their shard back to its
    owner). Every rank must call backward, as every rank called forward.

    Returns:
        (B, Hq, n, d) in q's dtype, this rank's shard of the output (in the zigzag layout with balance).
    """
    if (not isinstance(window, (tuple, list)) or len(window) != 2
            or not all(isinstance(w, int) and not isinstance(w, bool) and w >= -1 for w in window)):
        raise ValueError(f"context_parallel_attention: window must be (left, right) of ints >= -1 "
                         f"(-1: unbounded), got {window!r}")
    left, right = int(window[0]), 0 if causal else int(window[1])
    world = dist.get_world_size(group)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"context_parallel_attention: {name} must be a 4-D shard (B, H, N, d), got shape "
                             f"{tuple(t.shape)}")
    n = q.shape[2]
    if k.shape[2] != n or v.shape[2] != n:
        raise ValueError(f"context_parallel_attention: q, k and v shards must have the same length, got "
                         f"{n}, {k.shape[2]}, {v.shape[2]}")
    if balance and n % 2:
        raise ValueError(f"context_parallel_attention: balance=True needs an even shard length, got {n}")
    # Every rank's shapes, dtype and arguments must agree (a mismatch would hang the ring or mix
    # messages of other sizes): one small all_gather, then the same answer on every rank.
    scale_bits = -1 if scale is None else struct.unpack("<q", struct.pack("<d", float(scale)))[0]
    dtypes = (torch.float32, torch.float16, torch.bfloat16)
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    call = (list(q.shape) + list(k.shape) + list(v.shape) + [dtypes.index(t.dtype) if t.dtype in dtypes else 9
                                                             for t in (q, k, v)]
            + [left, right, int(balance), scale_bits, int(grad)])
    mine = torch.tensor(call, dtype=torch.long, device=q.device)
    every = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every, mine, group=group)
    if any(not torch.equal(s, mine) for s in every):
        raise ValueError("context_parallel_attention: every rank's q, k and v shards must have the same shapes "
                         "and dtypes, the same causal, window, scale and balance, and all need gradients or none; "
                         f"got (q, k, v shapes and dtypes, left, right, balance, scale bits, grad) "
                         f"{[s.tolist() for s in every]}")
    # What attention_lse would refuse, refused here on every rank before a message is posted (an error
    # inside the ring would leave the other ranks' exchanges pending).
    # Checked on empty views of the shards (nothing computed); the error then shows the shards' own shapes.
    c, wl, wr = _op_band(left, right)
    try:
        torch_flashattn.attention_lse(q[:, :, :0], k[:, :, :0], v[:, :, :0], causal=c, window=(wl, wr), scale=scale)
    except RuntimeError as e:
        raise RuntimeError(f"context_parallel_attention: {e} (checked on empty views; the shards are q "
                           f"{tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)})") from None
    if grad:
        return _Ring.apply(q, k, v, left, right, scale, group, balance)
    return _ring_forward(q, k, v, left, right, scale, group, balance)[0].to(q.dtype)
