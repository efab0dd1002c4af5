"""A model of how the Hopper kernel's CTAs share out causal tiles (csrc/cuda/sm90.cu, cta_tile and
tile_pos), to compare walks before spending GPU time on them. Runs on any machine:

    python3 -m tools.sm90.walks

The kernel walks persistent causal grids as the snake; the rank-major walk is modelled for
comparison only (the kernel no longer has it; bench/LOG.md, 2026-11-30).

A tile's cost is its key blocks (BM = BN: the heaviest tile of a head has Nq / BM blocks) plus a
fixed overhead: one block for a CTA of its own (start, Q load, pipeline fill, O store, all
exposed), 0.3 for a persistent CTA's next tile (mostly hidden). For FlashAttention's grid (B·N =
16k, H·d = 2048) it prints each walk's balance (ideal time / time of the slowest SM) and the mean
number of heads whose tiles are in flight at once (their K and V compete for L2).
"""
import heapq
import math

SMS = 132


def sequence(n_bh, n_q, order):
    """(head, rank) in launch order; rank 0 is a head's heaviest tile."""
    if order == "head":
        return [(bh, r) for bh in range(n_bh) for r in range(n_q)]
    return [(bh, r) for r in range(n_q) for bh in range(n_bh)]


def run_static(seq, n_q, cta_of, overhead):
    """Persistent CTAs: the i-th tile of seq goes to CTA cta_of(i); each CTA runs its tiles back to back."""
    t = [0.0] * SMS
    spans = []
    for i, (bh, r) in enumerate(seq):
        c = cta_of(i)
        w = n_q - r + overhead
        spans.append((t[c], t[c] + w, bh))
        t[c] += w
    return max(t), spans


def run_dynamic(seq, n_q, overhead):
    """The hardware's CTA scheduler (one CTA per tile): each tile starts on the first free SM."""
    free = [(0.0, c) for c in range(SMS)]
    spans, end = [], 0.0
    for bh, r in seq:
        t, c = heapq.heappop(free)
        w = n_q - r + overhead
        spans.append((t, t + w, bh))
        heapq.heappush(free, (t + w, c))
        end = max(end, t + w)
    return end, spans


def heads_in_flight(spans, end, samples=64):
    counts = [len({bh for a, b, bh in spans if a <= end * s / samples < b}) for s in range(1, samples)]
    return sum(counts) / len(counts)


def stride(i):
    return i % SMS


def snake(i):
    p, c = divmod(i, SMS)
    return c if p % 2 == 0 else SMS - 1 - c


def main():
    print("causal, B·N = 16k, H·d = 2048; balance (1 = perfect) / heads in flight")
    print(f"{'d':>4} {'N':>6} {'tiles':>6} {'per tile':>14} {'rank':>14} {'head':>14} {'snake':>14}")
    for d, bm in ((64, 192), (128, 128), (256, 128)):
        for n in (512, 1024, 2048, 4096, 8192, 16384):
            n_bh, n_q = (16384 // n) * (2048 // d), math.ceil(n / bm)
            ideal = n_bh * n_q * (n_q + 1) / 2 / SMS
            cols = []
            end, spans = run_dynamic(sequence(n_bh, n_q, "head"), n_q, 1.0)
            cols.append((ideal / end, heads_in_flight(spans, end)))
            for order, cta_of in (("rank", stride), ("head", stride), ("head", snake)):
                end, spans = run_static(sequence(n_bh, n_q, order), n_q, cta_of, 0.3)
                cols.append((ideal / end, heads_in_flight(spans, end)))
            print(f"{d:4} {n:6} {n_bh * n_q:6} " + " ".join(f"{b:8.2f} /{h:4.0f}" for b, h in cols))


if __name__ == "__main__":
    main()
