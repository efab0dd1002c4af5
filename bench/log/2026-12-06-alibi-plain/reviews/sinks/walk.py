# fa_plan_sm90_walk (plan.c) for d128_long_keys on 132 SMs, automatic (tail 0) and forced 3.
import math
def below(c,g,x): return (x-c+g-1)//g if x>c else 0
def rounds(g,n1,n2,c2,n3,c3):
    w=0
    for c in (0,n1%g,(n1+n2)%g,(n1+n2+n3)%g):
        a,b,e=below(c,g,n1),below(c,g,n1+n2),below(c,g,n1+n2+n3); w=max(w,a+(b-a)*c2+(e-b)*c3)
    return w
def walk(Nq,Nk,B,Hq,tail,grid=132,BM=192,BN=80,CONS=3):
    nqt=-(-Nq//BM); n=nqt*B*Hq; rem=Nq%BM; busy=(rem+63)//64
    moved=n//nqt if rem and busy<CONS else 0; n_full=n-moved; light=min(1,(busy+1)/CONS)
    best=rounds(grid,n,0,0,0,0); w=dict(n_full=n,n_whole=n,split=0,parts=1)
    if moved:
        r=rounds(grid,n_full,0,0,moved,light)
        if r<best-0.05: best=r; w.update(n_full=n_full,n_whole=n_full)
    forced=tail if tail>=2 else 0; nb=-(-Nk//BN); whole=best
    for s in range(forced or 2,(forced or 4)+1):
        if nb<2*s: break
        for m in (0,1):
            if m==1 and moved==0: continue
            full=n_full if m else n; t=full%grid
            if t==0 or full<grid: continue
            r=rounds(grid,full-t,t*s,1/s,moved if m else 0,light)+t*s*7/Nk
            if (m==(moved>0)) if forced else (r<=whole-0.1 and r<best):
                best=r; w.update(n_full=full,n_whole=full-t,split=t,parts=s)
    return nqt,n,moved,w
for tail in (0,3):
    nqt,n,moved,w=walk(3500,2500,2,4,tail)
    tiles=range(w['n_whole'],w['n_whole']+w['split'])
    # head-major (non-causal, heads=1): tile t < n_full -> bh = t // q_tiles_in_order, rank = t % ...
    per = nqt if w['n_full']==n else nqt-1
    bhs=sorted({(t//per, t%per) for t in tiles})
    print(f"tail={tail}: q tiles/head {nqt}, tiles {n}, moved {moved}, walk {w}; split tiles (bh, rank): {bhs[0]}..{bhs[-1]}, heads {sorted({b for b,_ in bhs})}")
