from common import *
import sys
be=sys.argv[1]
g=torch.Generator().manual_seed(1)
bad=[]
def chk(name, fn, args_list, dyn, fg=True):
    torch._dynamo.reset()
    c=torch.compile(fn,backend=be,dynamic=dyn,fullgraph=fg)
    for i,args in enumerate(args_list):
        try:
            ref=fn(*args); out=c(*args)
            if not close(out,ref): bad.append((name,dyn,i,"MISMATCH",maxdiff(out,ref)))
        except Exception as e:
            bad.append((name,dyn,i,type(e).__name__,str(e).splitlines()[0][:300]))
# scale / window / softcap varying as python args
q=r(1,2,20,8,g=g);k=r(1,2,20,8,g=g);v=r(1,2,20,8,g=g)
for dyn in (False,True,None):
    chk("scale_arg", lambda q,k,v,s: fa.attention(q,k,v,scale=s), [(q,k,v,0.5),(q,k,v,0.1),(q,k,v,-2.0)], dyn)
    chk("sdpa_scale_arg", lambda q,k,v,s: fa.scaled_dot_product_attention(q,k,v,scale=s), [(q,k,v,0.5),(q,k,v,0.1),(q,k,v,3.0)], dyn)
    chk("window_arg", lambda q,k,v,l: fa.attention(q,k,v,window=(l,l)), [(q,k,v,2),(q,k,v,5),(q,k,v,7),(q,k,v,-1)], dyn)
    chk("softcap_arg", lambda q,k,v,c: fa.attention(q,k,v,softcap=c), [(q,k,v,1.0),(q,k,v,3.0),(q,k,v,7.0)], dyn)
    chk("causal_arg", lambda q,k,v,c: fa.attention(q,k,v,causal=c), [(q,k,v,True),(q,k,v,False)], dyn)
    # shapes changing
    shapes=[(1,2,20,8,20),(2,2,7,8,13),(1,4,33,8,5),(3,2,1,8,40),(1,2,0,8,4),(1,2,5,8,0)]
    al=[]
    for (B,H,Nq,d,Nk) in shapes:
        al.append((r(B,H,Nq,d,g=g),r(B,H,Nk,d,g=g),r(B,H,Nk,d,g=g)))
    chk("shapes_plain", lambda q,k,v: fa.attention(q,k,v,causal=True), al, dyn)
    chk("shapes_br", lambda q,k,v: fa.attention(q,k,v,causal=True,causal_align="bottom_right"), al, dyn)
    chk("shapes_lse", lambda q,k,v: fa.attention_lse(q,k,v,window=(3,1)), al, dyn)
    chk("shapes_sdpa", lambda q,k,v: fa.scaled_dot_product_attention(q,k,v), al, dyn)
    chk("shapes_sdpa_c", lambda q,k,v: fa.scaled_dot_product_attention(q,k,v,is_causal=True), al, dyn)
    # GQA ratio change
    al2=[(r(1,4,9,8,g=g),r(1,2,9,8,g=g),r(1,2,9,8,g=g)),(r(1,4,9,8,g=g),r(1,1,9,8,g=g),r(1,1,9,8,g=g)),(r(1,4,9,8,g=g),r(1,4,9,8,g=g),r(1,4,9,8,g=g))]
    chk("gqa", lambda q,k,v: fa.attention(q,k,v), al2, dyn)
    chk("gqa_sdpa", lambda q,k,v: fa.scaled_dot_product_attention(q,k,v,enable_gqa=True), al2, dyn)
    # strides: transposed views
    base=r(1,12,2,8,g=g)
    al3=[(q,k,v),(base.transpose(1,2),base.transpose(1,2),base.transpose(1,2)),(q[:,:,::2],k[:,:,::2],v[:,:,::2]), (q, k.expand(1,2,20,8), v[:1].expand(1,2,20,8))]
    chk("strides", lambda q,k,v: fa.attention(q,k,v), al3, dyn)
    chk("strides_sdpa", lambda q,k,v: fa.scaled_dot_product_attention(q,k,v), al3, dyn)
    # dtypes
    al4=[(q,k,v),(q.bfloat16(),k.bfloat16(),v.bfloat16()),(q.half(),k.half(),v.half())]
    chk("dtypes", lambda q,k,v: fa.attention(q,k,v), al4, dyn)
    # varlen
    def mk(lens_q,lens_k,H=2,d=8):
        cq=torch.tensor([0]+list(torch.tensor(lens_q).cumsum(0)),dtype=torch.int32)
        ck=torch.tensor([0]+list(torch.tensor(lens_k).cumsum(0)),dtype=torch.int32)
        return (r(int(cq[-1]),H,d,g=g),r(int(ck[-1]),H,d,g=g),r(int(ck[-1]),H,d,g=g),cq,ck,max(lens_q),max(lens_k))
    al5=[mk([3,5],[3,5]),mk([4,1,7],[6,2,7]),mk([2,2],[9,9]),mk([10],[3])]
    chk("varlen", lambda q,k,v,cq,ck,mq,mk_: fa.attention_varlen(q,k,v,cq,ck,mq,mk_,causal=True), al5, dyn)
    chk("varlen_lse", lambda q,k,v,cq,ck,mq,mk_: fa.attention_varlen(q,k,v,cq,ck,mq,mk_,window=(2,1),return_lse=True), al5, dyn)
    chk("varlen_br", lambda q,k,v,cq,ck,mq,mk_: fa.attention_varlen(q,k,v,cq,ck,mq,mk_,causal=True,causal_align="bottom_right",softcap=3.0), al5, dyn)
for b in bad: print(b)
print(be,"n bad",len(bad))
