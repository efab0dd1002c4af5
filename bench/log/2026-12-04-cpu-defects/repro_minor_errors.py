import torch, torch_flashattn as fa
torch.set_num_threads(2); torch.manual_seed(0)
q=torch.randn(1,2,5,8);k=torch.randn(1,2,5,8);v=torch.randn(1,2,5,8)
# 1. float window silently truncated: (1.5, 0.5) -> (1, 0), i.e. silently becomes causal-banded
def t(n,f):
    try: f(); print("[no error]", n)
    except Exception as e: print(f"[{type(e).__name__}] {n}: {str(e).splitlines()[0][:150]}")
t("window=(1.5,0.5)", lambda: fa.attention(q,k,v,window=(1.5,0.5)))
# 2. window entry >= 2**63: message "Expected int ... found type 'int'"
t("window=(2**63,0)", lambda: fa.attention(q,k,v,window=(2**63,0)))
# 3. q=None / list: AttributeError, argument not named
t("q=None", lambda: fa.attention(None,k,v))
# 4. drop-in, enable_gqa with Hq % Hkv != 0 on a decode-shaped call: error names the internal op fa.forward_kvcache
t("sdpa drop-in Hq=3,Hkv=2", lambda: fa.scaled_dot_product_attention(torch.randn(1,3,1,8),torch.randn(1,2,5,8),torch.randn(1,2,5,8),enable_gqa=True))
# 5. kvcache k_new of wrong dtype: message lists only shapes, not the dtype that is wrong
t("kvcache k_new fp16", lambda: fa.attention_kvcache(q[:,:,:1],k,v,k_new=torch.randn(1,2,1,8).half(),v_new=torch.randn(1,2,1,8)))
