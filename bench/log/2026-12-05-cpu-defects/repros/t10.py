from common import *
import sys, transformers as T, torch_flashattn.hf as fhf, warnings
warnings.filterwarnings("ignore")
name=fhf.register()
be=sys.argv[1]; which=sys.argv[2].split(",")
torch.manual_seed(0)
def cfgs():
    base=dict(vocab_size=64,hidden_size=32,intermediate_size=64,num_hidden_layers=2,num_attention_heads=4,num_key_value_heads=2,max_position_embeddings=128,head_dim=8)
    out={}
    out["llama"]=(T.LlamaConfig(**base),T.LlamaForCausalLM)
    out["mistral"]=(T.MistralConfig(**base,sliding_window=5),T.MistralForCausalLM)
    out["gemma2"]=(T.Gemma2Config(**base,sliding_window=5,attn_logit_softcapping=2.0,final_logit_softcapping=None,query_pre_attn_scalar=8),T.Gemma2ForCausalLM)
    b2=dict(base); b2.update(num_local_experts=2,num_experts_per_tok=1,sliding_window=5,layer_types=["sliding_attention","full_attention"])
    out["gptoss"]=(T.GptOssConfig(**b2),T.GptOssForCausalLM)
    out["bert"]=(T.BertConfig(vocab_size=64,hidden_size=32,intermediate_size=64,num_hidden_layers=2,num_attention_heads=4,max_position_embeddings=64),T.BertModel)
    return out
C=cfgs()
ids=torch.randint(0,64,(2,12))
pad=torch.ones(2,12,dtype=torch.long); pad[1,:4]=0   # left padding for decoders
padr=torch.ones(2,12,dtype=torch.long); padr[1,-4:]=0  # right padding for bert
for key in which:
    cfg,cls=C[key]
    torch.manual_seed(0)
    try: m_s=cls._from_config(cfg,attn_implementation="sdpa").eval()
    except ValueError: m_s=cls._from_config(cfg,attn_implementation="eager").eval()
    g_=torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in m_s.parameters():
            if p.dim()>=2: p.copy_(torch.randn(p.shape,generator=g_)*0.3)
    m_f=cls._from_config(cfg,attn_implementation=name).eval()
    m_f.load_state_dict(m_s.state_dict())
    am = padr if key=="bert" else pad
    for mask_desc, mask in (("nomask",None),("padded",am)):
        with torch.no_grad():
            ref=m_s(input_ids=ids,attention_mask=mask)
            ref=(ref.logits if hasattr(ref,"logits") else ref.last_hidden_state)
            if mask is not None and key!="bert": valid=mask.bool()
            elif mask is not None: valid=mask.bool()
            else: valid=torch.ones(2,12,dtype=torch.bool)
            for dyn in (False,True):
                for fg in (True,):
                    torch._dynamo.reset(); fa.reset_stats()
                    try:
                        c=torch.compile(m_f,backend=be,dynamic=dyn,fullgraph=fg)
                        o=c(input_ids=ids,attention_mask=mask)
                        o=(o.logits if hasattr(o,"logits") else o.last_hidden_state)
                        d=(o-ref)[valid].abs().max().item()
                        st={k:v for k,v in fa.stats().items() if v}
                        fa.reset_stats()
                        e=m_f(input_ids=ids,attention_mask=mask); e=(e.logits if hasattr(e,"logits") else e.last_hidden_state)
                        de=(o-e)[valid].abs().max().item()
                        print(f"{key:8s} {mask_desc:7s} dyn={dyn!s:5s} fg={fg!s:5s} |compiled-sdpa|={d:.2e} |compiled-eager_fa|={de:.2e} stats_compiled={st} stats_eager={ {k:v for k,v in fa.stats().items() if v} }",flush=True)
                    except Exception as ex:
                        print(f"{key:8s} {mask_desc:7s} dyn={dyn} fg={fg} ERROR {type(ex).__name__}: {' | '.join(l for l in str(ex).splitlines() if l.strip())[:400]}",flush=True)
