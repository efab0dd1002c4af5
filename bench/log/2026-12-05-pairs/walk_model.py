"""The causal walks' balance, modelled: each tile costs its key blocks plus half a block (its start
and end), and a grid of 132 CTAs takes them as each walk hands them out. Prints the busiest CTA's
load over the mean for FlashAttention's grid (B·N = 16k, H·d = 2048) and B = 1 at 8k keys:
"snake" (the persistent walk, head by head, heaviest first, odd passes backwards), "pairs" (each
CTA a head's i-th heaviest and i-th lightest tile at a time), "tile grid" (one CTA per tile in
sections rank by rank: the hardware hands each tile to the first free SM).

    python3 bench/log/2026-12-05-pairs/walk_model.py
"""
import heapq

GRID, OVERHEAD = 132, 0.5


def snake(costs):
    load = [0.0] * GRID
    for i, c in enumerate(costs):
        p, k = divmod(i, GRID)
        load[GRID - 1 - k if p & 1 else k] += c + OVERHEAD
    return max(load)


def pairs(costs_by_position):
    load = [0.0] * GRID
    for t, c in enumerate(costs_by_position):
        load[(t // 2) % GRID] += c + OVERHEAD
    return max(load)


def greedy(costs):
    heap = [(0.0, i) for i in range(GRID)]
    for c in costs:
        t, i = heapq.heappop(heap)
        heapq.heappush(heap, (t + c + OVERHEAD, i))
    return max(t for t, _ in heap)


print("  d  B    N  tiles a head   snake   pairs  tile grid   (busiest CTA / mean)")
for d, bm, bn, B, N, heads in [(64, 192, 128, 8, 2048, 32), (64, 192, 128, 4, 4096, 32), (64, 192, 128, 2, 8192, 16),
                               (64, 192, 128, 1, 16384, 8), (128, 128, 128, 8, 2048, 16), (128, 128, 128, 4, 4096, 8),
                               (128, 128, 128, 2, 8192, 8), (128, 128, 128, 1, 8192, 8), (128, 128, 128, 1, 16384, 4),
                               (256, 128, 80, 4, 2048, 8), (256, 128, 80, 2, 8192, 2), (256, 128, 80, 1, 16384, 1)]:
    H, nq = 2048 // d, (N + bm - 1) // bm
    blocks = [-(-(nq - r) * bm // bn) for r in range(nq)]          # rank r: the r-th heaviest tile
    head_major = [blocks[r] for _ in range(B * H) for r in range(nq)]
    paired = [blocks[nq - 1 - (j >> 1)] if j & 1 else blocks[j >> 1] for _ in range(B * H) for j in range(nq)]
    sections = [blocks[r] for _ in range(B * H // heads) for r in range(nq) for _ in range(heads)]
    mean = sum(c + OVERHEAD for c in head_major) / GRID
    print(f"{d:3} {B:2} {N:5} {nq:6}       {snake(head_major) / mean:7.3f} {pairs(paired) / mean:7.3f} "
          f"{greedy(sections) / mean:9.3f}")
