# Register, spill and shared-memory report of every compiled CUDA kernel (`nvcc -Xptxas -v`), for
# each architecture the build gives its file (setup.py's CUDA_TARGETS). Needs nvcc only, no GPU.
#
#   python3 -m tools.ptxas                                 # -> bench/out/ptxas.md
#   python3 -m tools.ptxas --out bench/results/ptxas.md    # the table docs/benchmarks.md shows
import argparse
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCES = ["csrc/cuda/simt.cu", "csrc/cuda/sm80.cu", "csrc/cuda/sm90.cu", "csrc/cuda/fp32tc.cu", "csrc/cuda/fp32.cu",
           "csrc/cuda/sm80_backward.cu", "csrc/cuda/sm90_backward.cu", "csrc/cuda/turing.cu", "csrc/cuda/naive.cu", "csrc/cuda/decode.cu",
           "csrc/cuda/decode_simt.cu"]


def targets():
    """setup.py's CUDA_TARGETS (file -> its GPU targets), read without running setup.py; the
    targets as sm numbers ("75+ptx" -> "75"; "70?" kept only when FA_CUDA_ARCHS lists 70)."""
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "CUDA_TARGETS":
            table = ast.literal_eval(node.value)
    wanted = [a for a in os.environ.get("FA_CUDA_ARCHS", "").split(";") if a]
    out = {}
    for src, ts in table.items():
        archs = [t.split("+")[0].rstrip("?") for t in ts if not t.endswith("?") or t.rstrip("?") in wanted]
        out["csrc/cuda/" + src] = [a for a in archs if not wanted or a in wanted]
    return out


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    return out[:len(names)]


def report(src, archs):
    rows = []
    for arch in archs:
        cmd = ["nvcc", "-O3", "-DNDEBUG", "-std=c++17", "-Xptxas", "-v", f"-gencode=arch=compute_{arch},code=sm_{arch}",
               "-Icsrc", "-DFA_WITH_CUDA", "-c", src, "-o", os.devnull]
        text = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO).stderr
        kernel = None
        for line in text.splitlines():
            m = re.search(r"Compiling entry function '(\w+)'", line)
            if m:
                kernel = m.group(1)
            m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m and kernel:
                stack, st, ld = m.groups()
            m = re.search(r"Used (\d+) registers.*?(?:(\d+) bytes smem)?", line)
            if m and kernel and "Used" in line:
                smem = re.search(r"(\d+) bytes smem", line)
                rows.append((arch, kernel, m.group(1), stack, st, ld, smem.group(1) if smem else "0 (dynamic)"))
                kernel = None
    names = demangle([r[1] for r in rows])
    return [(r[0], n, *r[2:]) for r, n in zip(rows, names)]


def main():
    ap = argparse.ArgumentParser(prog="python3 -m tools.ptxas",
                                 description="registers, spills and shared memory of every CUDA kernel (nvcc only)")
    ap.add_argument("--out", type=Path, default=Path("bench/out/ptxas.md"))
    args = ap.parse_args()
    per_file = targets()
    lines = ["`nvcc -O3 -Xptxas -v` per kernel (dynamic shared memory is set at launch and not listed).",
             "sm90.cu: `registers` is the cap at launch (65536 / threads); setmaxnreg then gives each consumer",
             "warpgroup 240 (160 with 3 consumers) and the producer 24 (32); sm90_backward.cu: 240 and 24.", "",
             "| source | arch | kernel | registers | stack | spill st | spill ld | static smem |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for src in SOURCES:
        if not (REPO / src).exists():
            continue
        for arch, kernel, regs, stack, st, ld, smem in report(src, per_file[src]):
            kernel = re.sub(r"\(.*", "", kernel)
            lines.append(f"| {src} | sm_{arch} | `{kernel}` | {regs} | {stack} | {st} | {ld} | {smem} |")
    out = args.out if args.out.is_absolute() else REPO / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
