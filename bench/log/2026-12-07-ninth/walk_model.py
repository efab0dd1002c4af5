# The persistent snake and the counter walk of d = 128 causal windows (128 x 128 tiles, 16 heads, 132 CTAs)
# as list scheduling: each tile costs its key blocks + 1; the snake walks each head heaviest first, odd
# passes backwards; the counter hands the next item (rank by rank over a batch entry's heads) to the CTA
# that frees first. Prints each point's busiest CTA over the mean for both, and snake / counter.
import heapq, math
def costs(N, left, bm=128, bn=128):
    nt = (N + bm - 1)//bm
    c = []
    for r in range(nt):
        m0 = (nt-1-r)*bm; m1 = min(m0+bm, N)-1
        lo = max(m0-left, 0); hi = m1
        c.append(1.0 + (hi//bn - lo//bn + 1))
    return c
def snake(B, H, N, left, grid=132):
    c = costs(N, left); nt = len(c); n = B*H*nt
    load = [0.0]*grid
    for x in range(n):
        i, j = divmod(x, grid)
        cta = grid-1-j if i & 1 else j
        load[cta] += c[x % nt]
    return max(load)
def counter(B, H, N, left, grid=132):
    c = costs(N, left); nt = len(c)
    order = [c[r] for b in range(B) for r in range(nt) for h in range(H)]
    heap = [0.0]*grid
    for w in order:
        t = heapq.heappop(heap); heapq.heappush(heap, t + w)
    return max(heap)
pts = [(32,512,128),(16,1024,128),(16,1024,256),(16,1024,512),(8,2048,128),(8,2048,256),(4,4096,256),(4,4096,512),(1,16384,256),(8,2048,512),(8,2048,1024),(4,4096,1024),(1,16384,1024)]
for B,N,l in pts:
    s, k = snake(B,16,N,l), counter(B,16,N,l)
    mean = sum(costs(N,l))*B*16/132
    print(f"({l},0) {B}x{N}: snake/mean {s/mean:.3f} counter/mean {k/mean:.3f} snake/counter {s/k:.3f}")
