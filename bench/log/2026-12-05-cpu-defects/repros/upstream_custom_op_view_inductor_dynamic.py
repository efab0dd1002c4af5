# same pattern with a pure-PyTorch custom op that mutates its argument: is it a torch bug?
import torch
torch.set_num_threads(1)
@torch.library.custom_op("h5::app", mutates_args=("kc",))
def app(q: torch.Tensor, kc: torch.Tensor, kn: torch.Tensor) -> torch.Tensor:
    kc[..., 2:3, :].copy_(kn)
    return q * kc.sum()
@app.register_fake
def _(q, kc, kn): return torch.empty_like(q)
def step(q, kb, kn): return app(q, kb[1], kn)
kb=torch.randn(2,1,1,4,2); q=torch.randn(1,1,1,2); kn=torch.ones(1,1,1,2)
for dyn in (False,True):
    torch._dynamo.reset()
    a,b=kb.clone(),kb.clone()
    r1=step(q,a,kn); r2=torch.compile(step,backend="inductor",dynamic=dyn,fullgraph=True)(q,b,kn)
    print(dyn, torch.equal(a,b), (r1-r2).abs().max().item())
