from common import *
torch.manual_seed(0)
class A(torch.nn.Module):
    def forward(s,q,k,v): return fa.attention(q,k,v,causal=True)+fa.attention(q,k,v,window=(2,1),softcap=3.0)
class D(torch.nn.Module):
    def forward(s,q,k,v): return F.scaled_dot_product_attention(q,k,v,is_causal=True)
class KV(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.register_buffer("kc",torch.zeros(1,2,16,8)); s.register_buffer("vc",torch.zeros(1,2,16,8))
    def forward(s,q,kn,vn,sl): return fa.attention_kvcache(q,s.kc,s.vc,cache_seqlens=sl,k_new=kn,v_new=vn,causal=True)
q,k,v=(torch.randn(2,2,10,8) for _ in range(3))
q2,k2,v2=(torch.randn(3,2,13,8) for _ in range(3))
from torch.export import export, Dim
for strict in (False,True):
    for name,mod,ctx in (("attention",A(),None),("drop-in patched",D(),"patch")):
        try:
            if ctx:
                with fa.patch_sdpa(): ep=export(mod,(q,k,v),strict=strict)
            else: ep=export(mod,(q,k,v),strict=strict)
            ops={str(n.target) for n in ep.graph.nodes if n.op=="call_function" and ("fa." in str(n.target) or "attention" in str(n.target))}
            out=ep.module()(q,k,v); ref=A()(q,k,v) if name=="attention" else F.scaled_dot_product_attention(q,k,v,is_causal=True)
            print(strict,name,ops,"match" if close(out,ref) else f"MISMATCH {maxdiff(out,ref)}")
            # dynamic shapes
            Bd,Nd=Dim("B",max=8),Dim("N",min=2,max=64)
            ds={"q":{0:Bd,2:Nd},"k":{0:Bd,2:Nd},"v":{0:Bd,2:Nd}}
            if ctx:
                with fa.patch_sdpa(): ep2=export(mod,(q,k,v),strict=strict,dynamic_shapes=ds)
            else: ep2=export(mod,(q,k,v),strict=strict,dynamic_shapes=ds)
            out=ep2.module()(q2,k2,v2); ref=A()(q2,k2,v2) if name=="attention" else F.scaled_dot_product_attention(q2,k2,v2,is_causal=True)
            print(strict,name,"dynamic","match" if close(out,ref) else f"MISMATCH {maxdiff(out,ref)}")
            # save / load roundtrip
            import io; buf=io.BytesIO(); torch.export.save(ep2,buf); buf.seek(0); ep3=torch.export.load(buf)
            out=ep3.module()(q2,k2,v2); print(strict,name,"save/load","match" if close(out,ref) else "MISMATCH")
        except Exception as e:
            print(strict,name,"ERROR",type(e).__name__,' | '.join(l for l in str(e).splitlines() if l.strip())[:400])
    try:
        m1,m2=KV(),KV()
        ep=export(m2,(torch.randn(1,2,1,8),torch.randn(1,2,1,8),torch.randn(1,2,1,8),torch.tensor([0],dtype=torch.int32)),strict=strict)
        em=ep.module()
        m2b=KV()
        ok=True
        for step in range(4):
            a=(torch.randn(1,2,1,8),torch.randn(1,2,1,8),torch.randn(1,2,1,8),torch.tensor([step],dtype=torch.int32))
            r1=m1(*a); r2=em(*a)
            ok &= close(r1,r2)
        print(strict,"kvcache buffers exported: outputs", "match" if ok else "MISMATCH", "; exported module cache == eager cache:", torch.equal(em.kc,m1.kc))
    except Exception as e:
        print(strict,"kvcache ERROR",type(e).__name__,' | '.join(l for l in str(e).splitlines() if l.strip())[:400])
