# An auxiliary tensor (key_mask / attn_mask / sinks / cache_seqlens / cu_seqlens) on another device than q:
# no error naming the argument; the call is silently dispatched to the meta kernel and returns a data-less meta tensor.
import torch, torch_flashattn as fa
torch.set_num_threads(2)
q=torch.randn(2,4,3,8);k=torch.randn(2,2,5,8);v=torch.randn(2,2,5,8)
for name,kw in [("key_mask",dict(key_mask=torch.ones(2,5,dtype=torch.bool,device='meta'))),
                ("attn_mask",dict(attn_mask=torch.ones(3,5,device='meta'))),
                ("sinks",dict(sinks=torch.ones(4,device='meta'))),
                ("alibi_slopes",dict(alibi_slopes=torch.ones(4,device='meta')))]:
    try:
        o=fa.attention(q,k,v,**kw); print(f"{name} on meta: no error; output device = {o.device}")
    except Exception as e: print(name, "raises", e)
try:
    o=fa.attention_kvcache(q,k,v,cache_seqlens=torch.tensor([1,2],dtype=torch.int32,device='meta')); print("cache_seqlens on meta: output device", o.device)
except Exception as e: print("cache_seqlens raises", e)
try:
    cu=torch.tensor([0,3,6],dtype=torch.int32,device='meta')
    o=fa.attention_varlen(torch.randn(6,4,8),torch.randn(6,2,8),torch.randn(6,2,8),cu,cu,3,3); print("cu_seqlens on meta: output device", o.device)
except Exception as e: print("cu_seqlens raises", e)
# for comparison, a CPU op with a meta operand:
try: torch.add(torch.ones(2), torch.ones(2, device='meta')); print("torch.add cpu+meta: no error")
except Exception as e: print("torch.add cpu+meta raises:", str(e)[:100])
plain=fa.attention(q,k,v)
for name,kw in [("key_mask all-false (meta)",dict(key_mask=torch.zeros(2,5,dtype=torch.bool,device='meta'))),
                ("attn_mask -inf (meta)",dict(attn_mask=torch.full((3,5),float('-inf'),device='meta'))),
                ("sinks 100 (meta)",dict(sinks=torch.full((4,),100.0,device='meta')))]:
    o=fa.attention(q,k,v,**kw)
    cpu_kw={a:b.to('cpu') if False else None for a,b in kw.items()}
    print(f"{name}: max|out - plain| = {(o-plain).abs().max().item():.3g}  (same kwarg on CPU would change the result)")
print("cpu reference key_mask all-false:", fa.attention(q,k,v,key_mask=torch.zeros(2,5,dtype=torch.bool)).abs().max().item())
