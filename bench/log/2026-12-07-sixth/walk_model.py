"""The window walks' cost model (fa_plan_sm90_window_snake's: a tile costs the key blocks its rows see + 1,
one CTA per tile FA_SM90_TILE_START = 1.45 more a tile) for four walks, beside call 2's measurements: one
CTA per tile (greedy over head-major tiles, as the hardware hands out CTAs), the snake, the rotated walk, and
a counter-fed persistent walk (greedy over the packed kernel's rank-major order). Times over the counter's;
measured: the packed walk's TFLOP/s over each other's (the rotated column from the FA_SM90_WINDOW_ROTATE
library). python3 bench/log/2026-12-07-sixth/walk_model.py"""
import heapq
TS=1.45; SMS=132
def costs(nqt,bm,bn,nq,nk,left):
    c=[]
    for r in range(nqt):
        m0=(nqt-1-r)*bm; m1=min(m0+bm,nq)-1
        lo=max(m0-left,0); hi=min(m1,nk-1)
        c.append(1.0+(hi//bn-lo//bn+1))
    return c
def static(heads,nqt,c,grid,mode):
    n=heads*nqt; load=[0.0]*grid
    for it in range((n+grid-1)//grid):
        for cta in range(grid):
            x=it*grid+(((grid-1-cta) if it&1 else cta) if mode=='snake' else (cta+it)%grid)
            if x<n: load[cta]+=c[x%nqt]
    return max(load)
def greedy(seq,grid,extra=0.0):
    h=[0.0]*grid; heapq.heapify(h)
    for w in seq:
        t=heapq.heappop(h); heapq.heappush(h,t+w+extra)
    return max(h)
# measured (rule, tile, snake, rotated, packed) TFLOP/s, H100 2026-12-07 sixth, call 2
M={"d64 win256 4k":(64,4,4096,256,179.9,157.6,181.3,175.1,191.5),
"d64 win1024 4k":(64,4,4096,1024,334.6,335.8,322.8,358.0,373.0),
"d64 win1024 2k":(64,8,2048,1024,318.1,319.3,289.9,346.8,362.7),
"d64 win512 2k":(64,8,2048,512,247.5,235.9,248.6,262.3,272.4),
"d64 win1024 16k":(64,1,16384,1024,368.0,340.8,369.0,360.6,385.0),
"d64 win4096 16k":(64,1,16384,4096,474.5,474.5,433.7,None,488.7),
"d128 win1024 4k":(128,4,4096,1024,501.7,447.8,504.6,474.5,497.7),
"d128 win512 2k":(128,8,2048,512,365.2,310.4,368.2,361.0,372.9),
"d128 win4096 16k":(128,1,16384,4096,611.0,612.3,553.9,None,633.0)}
print(f"{'point':18s} {'model: tile snake rot counter (time / counter)':48s} | measured: counter over tile snake rot")
for name,(d,B,N,left,rule,tile,snake,rot,packed) in M.items():
    H=2048//d; bm={64:192,128:128}[d]; bn=128
    nqt=-(-N//bm); heads=B*H; n=heads*nqt; grid=min(n,SMS)
    c=costs(nqt,bm,bn,N,N,left)
    head_major=[c[x%nqt] for x in range(n)]
    rank_major=[c[r] for r in range(nqt) for h in range(heads)]
    T=greedy(head_major,grid,TS); S=static(heads,nqt,c,grid,'snake'); R=static(heads,nqt,c,grid,'rot'); C=greedy(rank_major,grid)
    f=lambda x: f"{x:.3f}" if x else "  -  "
    print(f"{name:18s} {T/C:.3f} {S/C:.3f} {R/C:.3f} 1.000                        | {f(packed/tile)} {f(packed/snake)} {f(packed/rot) if rot else '  -  '}")
