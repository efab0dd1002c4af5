"""The most a causal sliding window (left, 0) can reach against a causal call of the same N, on tiles of
bm query rows by bn keys that compute every key block they touch whole: visible pairs over computed
pairs, for the window and for the causal call, and their ratio. No per-tile cost is counted (prologue,
epilogue, the mask's own instructions), so real kernels stay below it. python3 window_bound.py"""


def useful(N, left, bm, bn):
    visible = computed = 0
    for m0 in range(0, N, bm):
        m1 = min(m0 + bm, N) - 1
        lo = max(m0 - left, 0) if left >= 0 else 0
        computed += (m1 // bn - lo // bn + 1) * bn * (m1 - m0 + 1)
        visible += sum(min(i + 1, left + 1) if left >= 0 else i + 1 for i in range(m0, m1 + 1))
    return visible / computed


print("| N | window | tile (rows × keys) | window useful | causal useful | bound (ratio) |")
print("| --- | --- | --- | --- | --- | --- |")
for N, left in ((4096, 128), (4096, 256), (4096, 512), (4096, 1024), (4096, 2048), (16384, 1024),
                (16384, 4096)):
    for bm, bn in ((128, 128), (192, 128), (128, 176), (64, 64)):
        w, c = useful(N, left, bm, bn), useful(N, -1, bm, bn)
        print(f"| {N} | ({left}, 0) | {bm} × {bn} | {w:.3f} | {c:.3f} | {w / c:.3f} |")
