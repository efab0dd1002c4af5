# fa_row_end (csrc/fa_variant.h) and the SINK merge (sm90_kernel.cuh) in float32, against float64 truth.
import numpy as np, math, itertools
f=np.float32; L2E=f(1.4426950408889634); LN2=f(0.69314718055994531)
np.seterr(all='ignore')
def row_end(m,l,s2):
    m,l,s2=f(m),f(l),f(s2); none = l==0
    M = m if (not none and m > s2) else s2
    lt = (f(0) if none else f(l*np.exp2(f(m-M)))) + (f(0) if s2==-np.inf else np.exp2(f(s2-M)))
    lt=f(lt); o_mul = f(0) if none else f(np.exp2(f(m-M))/lt)
    return o_mul, f(f(M+np.log2(lt))*LN2)
def merge(lses, s2):
    M=f(-np.inf)
    for x in lses: M=np.fmax(M,f(x))
    M=np.fmax(M,f(s2))   # fmaxf ignores NaN
    l=np.exp2(f(s2-M)) if s2!=-np.inf else f(0)
    w=[np.exp2(f(f(x)-M)) for x in lses]
    for x in w: l=f(l+x)
    return [f(x/l) for x in w], f(f(M+np.log2(l))*LN2)
worst=0; bad=[]
for sink in [-np.inf,-3e38,-2.35e38,-1e30,-1e4,-100,-30,-5,0,1,5,30,100,1e4,1e30,2.3e38,2.35e38,2.4e38,np.inf,np.nan]:
    s2=f(f(sink)*L2E)
    for mnat in [-1e4,-30,-1,0,2,8,30,1e4]:
        for l in [1.0,1.5,1000.0,4096.0,1e6]:
            m2=f(f(mnat)*L2E)   # the row max in log2 units as the kernel holds it
            o,lse=row_end(m2,l,s2)
            # truth, float64, from the same m2/l (the row's key part) and the sink in natural units
            key_ln = float(m2)*math.log(2)+math.log(l)   # ln Σ e^s
            if math.isnan(sink) or sink>=2.3587e38: want_nan=True
            else: want_nan=False
            if want_nan:
                if not (np.isnan(o) and np.isnan(lse)): bad.append(("expected NaN",sink,mnat,l,o,lse))
                continue
            tot = np.logaddexp(key_ln, sink) if sink!=-np.inf else key_ln
            want_o = math.exp(float(m2)*math.log(2) - tot)   # o_mul = 2^m / denominator
            e_lse = abs(float(lse)-tot)/max(1,abs(tot)); e_o = abs(float(o)-want_o)/max(want_o,1e-300)
            if e_lse>3e-7 or (want_o>1e-37 and e_o>1e-6) or not np.isfinite(lse):
                bad.append((sink,mnat,l,float(o),want_o,float(lse),tot))
print("row_end anomalies:",len(bad)); [print("  ",b) for b in bad[:20]]
bad=[]
for sink in [-np.inf,-1e4,-30,0,5,7,8,30,1e4,2.3e38,np.inf,np.nan]:
    s2=f(f(sink)*L2E)
    for lses in ([10.,11.,12.],[10.,10.,10.,10.],[-20,5,100],[1e4,1e4-1,1e4+1]):
        w,lse=merge([f(f(x)*L2E) for x in lses], s2)
        tot=np.logaddexp.reduce([float(f(f(x)*L2E))*math.log(2) for x in lses]+([sink] if sink!=-np.inf else []))
        if math.isnan(sink) or sink==np.inf:
            if not np.isnan(lse): bad.append(("expected NaN",sink,lses,lse))
            continue
        if abs(float(lse)-tot)/max(1,abs(tot))>3e-7: bad.append((sink,lses,float(lse),tot))
print("merge anomalies:",len(bad)); [print("  ",b) for b in bad]
