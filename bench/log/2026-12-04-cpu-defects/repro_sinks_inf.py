# sinks[h] = +inf: by the documented semantics the denominator is +inf, so out = 0 and lse = +inf; fa returns NaN for both.
import torch, math, torch_flashattn as fa
torch.set_num_threads(2); torch.manual_seed(0)
q=torch.randn(1,2,3,8);k=torch.randn(1,2,4,8);v=torch.randn(1,2,4,8)
o,l=fa.attention_lse(q,k,v,sinks=torch.tensor([math.inf,0.0]))
print("head 0 (sink=+inf): out", o[0,0,0,:3].tolist(), "lse", l[0,0].tolist(), "| expected out 0, lse +inf")
print("head 1 (sink=0)   : out finite", torch.isfinite(o[0,1]).all().item())
