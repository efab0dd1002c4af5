"""The block loop of one compiled kernel, read from its SASS: the innermost backward branch whose body
holds a given number of HGMMA, cut into straight runs at each branch, branch target, barrier and
wgmma fence, with each run's instruction mix. For comparing what a loop iteration executes (the runs a branch skips
are listed apart) between two kernels, ours or a peer's, with no GPU.

    python3 -m tools.sass_loops LIB.so 'fa_sm90_forward_kernel<__nv_bfloat16, sm90_tile_fenced<.*, 0>' [--hgmma 16]

LIB: a shared library or cubin (every cubin in it is searched); the pattern is matched against the
demangled kernel names (c++filt). cuobjdump: $CUOBJDUMP, else on PATH.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

CONTROL = ("BRA", "SYNCS", "BAR", "WARPGROUP", "BSSY", "BSYNC", "VOTE", "EXIT", "RET")


def cuobjdump():
    return os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump") or sys.exit("cuobjdump not found ($CUOBJDUMP)")


def kernels(lib, pattern):
    """[(cubin path, mangled name, demangled name)] of the kernels in lib matching pattern."""
    tool = cuobjdump()
    work = tempfile.mkdtemp()
    subprocess.run([tool, "-xelf", "all", os.path.abspath(lib)], cwd=work, check=True, capture_output=True)
    found = []
    for cubin in sorted(os.listdir(work)):
        path = os.path.join(work, cubin)
        names = re.findall(r"Function : (\S+)", subprocess.run([tool, "-sass", path], capture_output=True,
                                                              text=True).stdout)
        plain = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
        found += [(path, n, p) for n, p in zip(names, plain) if re.search(pattern, p)]
    return tool, found


def instructions(tool, cubin, name):
    """[(address, instruction text)] of one kernel."""
    sass = subprocess.run([tool, "-sass", "-fun", name, cubin], capture_output=True, text=True).stdout
    return [(int(m[1], 16), m[2].strip()) for m in re.finditer(r"/\*([0-9a-f]{4,6})\*/\s+(.*?);", sass)]


def opcode(text):
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("pattern")
    ap.add_argument("--hgmma", type=int, default=16, help="HGMMA instructions in one iteration of the loop")
    args = ap.parse_args()
    tool, found = kernels(args.lib, args.pattern)
    if len(found) != 1:
        sys.exit(f"{len(found)} kernels match: " + "; ".join(p[:160] for _, _, p in found[:8]))
    cubin, name, plain = found[0]
    ins = instructions(tool, cubin, name)
    loops = []
    for i, (a, text) in enumerate(ins):
        m = re.search(r"BRA\s+(?:\S+\s+)?0x([0-9a-f]+)", text)
        if m and int(m[1], 16) < a:
            body = [t for b, t in ins if int(m[1], 16) <= b <= a]
            if sum(opcode(t) == "HGMMA" for t in body) == args.hgmma:
                loops.append((len(body), int(m[1], 16), a))
    if not loops:
        sys.exit(f"no loop with {args.hgmma} HGMMA")
    _, lo, hi = min(loops)
    print(f"{plain[:200]}\nloop {lo:05x}-{hi:05x}")
    body = [x for x in ins if lo <= x[0] <= hi]
    targets = {int(m[1], 16) for _, t in body for m in [re.search(r"BRA\s+(?:\S+\s+)?0x([0-9a-f]+)", t)] if m}
    run, start = collections.Counter(), lo
    for a, text in body + [(hi + 16, "END")]:
        if a in targets and run:                    # a branch lands here: a run of its own
            n = sum(run.values())
            print(f"  {start:05x} {n:4d}  " + ", ".join(f"{k} {v}" for k, v in run.most_common(10)))
            run, start = collections.Counter(), a
        if text == "END" or opcode(text) in CONTROL:
            if run:
                n = sum(run.values())
                print(f"  {start:05x} {n:4d}  " + ", ".join(f"{k} {v}" for k, v in run.most_common(10)))
            if text != "END":
                print(f"  {a:05x}       {text[:100]}")
            run, start = collections.Counter(), a + 16
        else:
            run[opcode(text)] += 1


if __name__ == "__main__":
    main()
