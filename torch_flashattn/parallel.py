"""Context parallelism: one attention call over a sequence split across the ranks of a
torch.distributed group (ring attention).

Each rank holds a contiguous shard of the sequence (dim 2 of (B, H, N, d)) of q, k and v, shards in
rank order. The K/V shards travel round the ring by point-to-point messages (batch_isend_irecv; NCCL
on GPUs, gloo on CPUs); while the next shard is in flight, the rank attends its queries to the shard
it holds with torch_flashattn.attention_lse, and the partial results merge in fp32 by their
log-sum-exp. Causal ranks skip the shards their queries cannot see. balance=True takes the head-tail
("zigzag") layout: the sequence is cut into 2W chunks and rank r holds chunks r and 2W − 1 − r, so
every rank has the same causal work.
"""
import math

import torch
import torch.distributed as dist

import torch_flashattn

__all__ = ["context_parallel_attention", "zigzag_shard", "zigzag_unshard"]


def zigzag_shard(x, rank, world, dim=2):
    """The balance=True layout of a full sequence: chunks rank and 2·world − 1 − rank of 2·world."""
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


def _attend(q, k, v, causal, scale):
    out, lse = torch_flashattn.attention_lse(q, k, v, causal=causal, scale=scale)
    return out.float(), lse


def context_parallel_attention(q, k, v, *, causal=False, scale=None, group=None, balance=False):
    """This rank's output shard of attention over the whole sequence, the same as single-device
    ``torch_flashattn.attention`` over the concatenated shards (with ``causal`` top-left over the whole
    sequence).

    Args:
        q: (B, Hq, n, d) this rank's query shard; k, v: (B, Hkv, n, d) its key/value shards. Every
            rank's shards have the same shapes (n the same on every rank; with balance, n even).
        causal: causal over the whole sequence (global positions).
        scale: as in attention; default 1/sqrt(d).
        group: the process group (default: the world).
        balance: the shards are in the zigzag layout (zigzag_shard), for even causal work.

    Forward only: inputs that require grad raise (the ring's messages carry no gradient).

    Returns:
        (B, Hq, n, d) in q's dtype, this rank's shard of the output (in the zigzag layout with balance).
    """
    if any(t.requires_grad for t in (q, k, v)) and torch.is_grad_enabled():
        raise RuntimeError("context_parallel_attention: forward only, the ring carries no gradient; "
                           "call it under torch.no_grad() or on tensors that do not require grad")
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    n = q.shape[2]
    if k.shape[2] != n or v.shape[2] != n:
        raise ValueError(f"context_parallel_attention: q, k and v shards must have the same length, got "
                         f"{n}, {k.shape[2]}, {v.shape[2]}")
    if balance and n % 2:
        raise ValueError(f"context_parallel_attention: balance=True needs an even shard length, got {n}")
    # The shards' lengths must agree across ranks: one small all_gather of the shapes.
    shape = torch.tensor(list(q.shape) + list(k.shape), dtype=torch.long, device=q.device)
    shapes = [torch.empty_like(shape) for _ in range(world)]
    dist.all_gather(shapes, shape, group=group)
    if any(not torch.equal(s, shape) for s in shapes):
        raise ValueError("context_parallel_attention: every rank's q, k and v shards must have the same shapes, "
                         f"got {[s.tolist() for s in shapes]}")
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    nxt_g = dist.get_global_rank(group, nxt) if group is not None else nxt
    prv_g = dist.get_global_rank(group, prv) if group is not None else prv

    kv = torch.stack([k, v]).contiguous()               # one message per step
    acc = None
    for step in range(world):
        src = (rank - step) % world                     # whose K/V this rank holds now
        reqs = []
        if step < world - 1:                             # the next shard travels while this one is used
            nxt_kv = torch.empty_like(kv)
            ops = [dist.P2POp(dist.isend, kv, nxt_g, group), dist.P2POp(dist.irecv, nxt_kv, prv_g, group)]
            reqs = dist.batch_isend_irecv(ops)
        kb, vb = kv[0], kv[1]
        if not balance:
            if not causal or src < rank:
                acc = _merge(acc, _attend(q, kb, vb, False, scale))
            elif src == rank:
                acc = _merge(acc, _attend(q, kb, vb, True, scale))
        else:
            # Query chunks rank, 2W − 1 − rank; key chunks src, 2W − 1 − src (global chunk indices).
            qc, kc = q.chunk(2, dim=2), (kb.chunk(2, dim=2), vb.chunk(2, dim=2))
            qi, ki = (rank, 2 * world - 1 - rank), (src, 2 * world - 1 - src)
            halves = [None, None]
            for a in range(2):
                for b in range(2):
                    if causal and ki[b] > qi[a]:
                        continue
                    part = _attend(qc[a], kc[0][b], kc[1][b], causal and ki[b] == qi[a], scale)
                    halves[a] = _merge(halves[a], part)
            for a in range(2):
                if halves[a] is None:
                    halves[a] = (torch.zeros(*qc[a].shape, dtype=torch.float32, device=q.device),
                                 torch.full(qc[a].shape[:3], -math.inf, device=q.device))
            acc = _merge(acc, (torch.cat([halves[0][0], halves[1][0]], dim=2),
                               torch.cat([halves[0][1], halves[1][1]], dim=2)))
        for r in reqs:
            r.wait()
        if step < world - 1:
            kv = nxt_kv
    return acc[0].to(q.dtype)
