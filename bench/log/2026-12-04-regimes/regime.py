"""One point's providers under four timing regimes, to see which moves the ratios."""
import json, statistics, sys
import torch, triton
import torch_flashattn
from bench.variants import point, POINTS, make, packed, visible_pairs, fa3_call, fa4_call

def inter(fns, reps, sleep, flush_on=True):
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    ev = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in fns] for _ in range(reps)]
    for r, row in enumerate(ev):
        for j in range(len(fns)):
            c = (j + r) % len(fns)
            if flush_on: flush.zero_()
            if sleep: torch.cuda._sleep(sleep)
            row[c][0].record(); fns[c](); row[c][1].record()
    torch.cuda.synchronize()
    return [statistics.median(row[c][0].elapsed_time(row[c][1]) for row in ev) for c in range(len(fns))]

def sustained(fn, n=200):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(20): fn()
    s.record()
    for _ in range(n): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / n

def main():
    H, d = 16, 128
    EXTRA=[point('dense causal 8k',2,8192,8192,causal=True),point('dense 2k',8,2048,2048),point('dense 16k',1,16384,16384),point('dense causal 16k',1,16384,16384,causal=True)]
    for p in POINTS+EXTRA:
        if not any(w in p["name"] for w in sys.argv[1:]): continue
        q, k, v, kw, lengths = make(p, H, d, torch.bfloat16)
        flops = 4.0 * d * H * visible_pairs(p, lengths)
        pk = packed(p, q, k, v, lengths) if p["varlen"] else None
        if pk: ours = lambda: torch_flashattn.attention_varlen(pk[0], pk[1], pk[2], pk[3], pk[3], pk[4], pk[4], causal=p["causal"])
        else: ours = lambda: torch_flashattn.attention(q, k, v, **kw)
        calls = {"fa": ours, "fa dense": lambda: torch_flashattn.attention(q, k, v, causal=p["causal"] and p["align"] == "top_left")}
        f3 = fa3_call(p, pk if pk else q, k, v); f4 = fa4_call(p, pk if pk else q, k, v, kw)
        if f3: calls["fa3"] = f3
        if f4: calls["fa4"] = f4
        for f in calls.values(): f()
        torch.cuda.synchronize()
        names, fns = list(calls), list(calls.values())
        res = {}
        res["interleaved sleep+flush"] = inter(fns, 300, 200_000)
        res["interleaved flush"] = inter(fns, 300, 0)
        res["interleaved none"] = inter(fns, 300, 0, False)
        res["do_bench each"] = [triton.testing.do_bench(f, warmup=25, rep=300, return_mode="median") for f in fns]
        res["sustained each"] = [sustained(f) for f in fns]
        res["do_bench each again"] = [triton.testing.do_bench(f, warmup=25, rep=300, return_mode="median") for f in reversed(fns)][::-1]
        for reg, ms in res.items():
            print(json.dumps({"point": p["name"], "regime": reg, **{n: round(flops / t / 1e9, 1) for n, t in zip(names, ms)}}))


if __name__ == "__main__":
    main()
