import json,sys,collections,math
R=collections.defaultdict(dict)
for l in open(sys.argv[1]):
    j=json.loads(l); R[(j['d'],j['causal'],j['N'])][j['label']]=j['tflops']
g=[]
for k,v in R.items():
    a=[v['cand%d'%r]/v['base%d'%r]-1 for r in (1,2) if 'cand%d'%r in v]; g+= [1+x for x in a]
    print(k, v['base1'], v.get('cand1'), ' '.join('%+.1f%%'%(100*x) for x in a))
print('geomean %+.2f%%'%(100*(math.exp(sum(map(math.log,g))/len(g))-1)))
