import torch, timeit, sys, statistics
import torch_flashattn as t
torch.set_num_threads(1)
q=torch.randn(1,2,1,16); k=torch.randn(1,1,8,16); v=torch.randn(1,1,8,16)
n=5000
B=torch._C._AutoDispatchBelowAutograd
C=torch._C._AutoDispatchBelowADInplaceOrView
op=torch.ops.fa.forward_kvcache.default
def f():
    with B():
        op(q,k,v,None,None,None,None,False)
def g():
    with C():
        op(q,k,v,None,None,None,None,False)
a=[];b=[]
with torch.no_grad():
    for r in range(20):
        a.append(timeit.timeit(f, number=n)/n*1e6); b.append(timeit.timeit(g, number=n)/n*1e6)
print(sys.argv[1], "with ADInplaceOrView %.2f  below it %.2f  diff median %.2f" % (min(a), min(b), statistics.median([x-y for x,y in zip(a,b)])))
