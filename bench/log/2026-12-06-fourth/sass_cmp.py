"""Per-kernel SASS of sm90.cu (sm_90a, nvcc 13.0, sass_build.sh) in three trees under /tmp/sass:
base (HEAD's csrc), meas (measured.diff: the tree the device ran) and fin (the tree that landed).
Prints the kernel counts and a Counter of (fin == base, fin == meas) over fin's kernels; a kernel
equal to neither is printed by name."""
import re, sys, collections
def funcs(path):
    out, name, body = {}, None, []
    for line in open(path):
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            if name: out[name] = body
            name, body = m.group(1), []
        elif name:
            # instruction text without addresses / encodings
            m2 = re.match(r"\s*/\*[0-9a-f]+\*/\s*(.*?)\s*;", line)
            if m2: body.append(m2.group(1))
    if name: out[name] = body
    return out
b, m, f = (funcs(f"{t}/sass.txt") for t in ("base", "meas", "fin"))
print(len(b), len(m), len(f))
cnt = collections.Counter()
for n in f:
    cap = "ILi3E" in n  # FA_VAR_CAP = 3 as template int
    fb, fm = f[n] == b.get(n), f[n] == m.get(n)
    cnt[(fb, fm)] += 1
    if not fb and not fm:
        print("neither:", n[:120], len(b.get(n, [])), len(m.get(n, [])), len(f[n]))
print(cnt)
