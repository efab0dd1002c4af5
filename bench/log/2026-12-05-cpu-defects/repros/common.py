import os, torch, warnings
torch.set_num_threads(1)
os.environ.setdefault("OMP_NUM_THREADS","1")
import torch_flashattn as fa
import torch.nn.functional as F
def r(*s, g=None, dtype=torch.float32):
    return torch.randn(*s, generator=g, dtype=dtype)
def close(a, b, tol=1e-5):
    if isinstance(a,(tuple,list)):
        return all(close(x,y,tol) for x,y in zip(a,b))
    a=a.float(); b=b.float()
    if a.shape!=b.shape: return False
    fa_=~torch.isfinite(a); fb=~torch.isfinite(b)
    if not torch.equal(fa_,fb) or not torch.equal(a[fa_].nan_to_num(),b[fb].nan_to_num()): return False
    a=a.masked_fill(fa_,0); b=b.masked_fill(fb,0)
    d=(a-b).abs().max().item() if a.numel() else 0.0
    ref=b.float().abs().max().item() if b.numel() else 1.0
    return d <= tol*max(ref,1e-3)+1e-6
def maxdiff(a,b):
    if isinstance(a,(tuple,list)): return max(maxdiff(x,y) for x,y in zip(a,b))
    return (a.float()-b.float()).abs().max().item() if a.numel() else 0.0
