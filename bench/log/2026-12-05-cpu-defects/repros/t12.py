from common import *
import transformers as T, torch_flashattn.hf as fhf, time, warnings
warnings.filterwarnings("ignore")
name=fhf.register()
base=dict(vocab_size=64,hidden_size=32,intermediate_size=64,num_hidden_layers=2,num_attention_heads=4,num_key_value_heads=2,max_position_embeddings=128,head_dim=8)
for key,cfg,cls in (("llama",T.LlamaConfig(**base),T.LlamaForCausalLM),("mistral",T.MistralConfig(**base,sliding_window=4),T.MistralForCausalLM)):
    torch.manual_seed(0)
    m_s=cls._from_config(cfg,attn_implementation="sdpa").eval()
    g_=torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in m_s.parameters():
            if p.dim()>=2: p.copy_(torch.randn(p.shape,generator=g_)*0.3)
    m_f=cls._from_config(cfg,attn_implementation=name).eval(); m_f.load_state_dict(m_s.state_dict())
    ids=torch.randint(0,64,(2,6)); am=torch.ones(2,6,dtype=torch.long); am[1,:2]=0
    kw=dict(max_new_tokens=10,do_sample=False,pad_token_id=0,attention_mask=am)
    ref=m_s.generate(ids,**kw)
    ref_static=m_s.generate(ids,cache_implementation="static",**kw)
    fa.reset_stats()
    t=time.time()
    try:
        m_f.forward=torch.compile(m_f.forward,backend="inductor",fullgraph=True)
        out=m_f.generate(ids,cache_implementation="static",**kw)
        print(key,"static+compiled fa == sdpa dynamic-cache:",torch.equal(out,ref),"== sdpa static:",torch.equal(out,ref_static), f"{time.time()-t:.1f}s", {k:v for k,v in fa.stats().items() if v})
        ids2=torch.randint(0,64,(2,9)); am2=torch.ones(2,9,dtype=torch.long); am2[0,:3]=0
        kw2=dict(kw); kw2["attention_mask"]=am2
        out2=m_f.generate(ids2,cache_implementation="static",**kw2); ref2=m_s.generate(ids2,**kw2)
        print(key,"second prompt length:",torch.equal(out2,ref2))
    except Exception as e:
        print(key,"ERROR",type(e).__name__,' | '.join(l for l in str(e).splitlines() if l.strip())[:500])
