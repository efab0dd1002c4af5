"""Summarises an Nsight Compute source page (SASS, CSV) of a Hopper kernel: where the warp
stall samples fall, by instruction and by opcode; with --segments, also by stretch of code between
landmarks (mbarrier waits and arrivals, wgmma fences and waits, named barriers, the first wgmma of
a group, branches back), in address order, so that two kernels' steps can be laid side by side.

    ncu -i report.ncu-rep --page source --csv --print-source sass > sass.csv
    python3 -m tools.sm90.ncu_source [--segments] sass.csv     (or sass.csv.gz)
"""
import argparse
import csv
import gzip
import re
from collections import Counter


def opcode(src):
    m = re.match(r"(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(\.[A-Z0-9_.]*)?", src)
    return (m.group(2), m.group(3) or "") if m else (src[:12], "")


REASONS = ("barrier", "wait", "long_sb", "short_sb", "selected", "mio", "math")


def read_page(path):
    """The source table's rows (address order), or None when the file holds none."""
    with (gzip.open(path, "rt", newline="") if path.endswith(".gz") else open(path, newline="")) as f:
        lines = f.read().splitlines()
    start = next((i for i, l in enumerate(lines) if "Source" in l and "Address" in l), None)
    return None if start is None else list(csv.DictReader(lines[start:]))


def num(r, c):
    try:
        return float(str(r.get(c, "0")).replace(",", "") or 0)
    except ValueError:
        return 0.0


def stretches(rows):
    """(first, end) row ranges that cover rows, cut at the landmarks."""
    cuts, last_hgmma = [], -100
    for i, r in enumerate(rows):
        op, sub = opcode(r.get("Source", "").strip())
        src = r.get("Source", "")
        if op in ("SYNCS", "WARPGROUP", "BAR", "EXIT"):
            cuts.append(i)
        elif op == "BRA" and "0x" in src and int(src.split("0x")[-1].split()[0].rstrip(";"), 16) < int(str(r.get("Address", "0")), 16):
            cuts.append(i + 1)                              # a branch back ends a loop's stretch
        if op == "HGMMA":
            if i - last_hgmma > 12:
                cuts.append(i)
            last_hgmma = i
    cuts = sorted(set([0] + cuts)) + [len(rows)]
    return list(zip(cuts, cuts[1:]))


def segments(rows, key, min_share=0.3):
    """Prints each stretch holding >= min_share % of the samples, in thousands of samples (comparable
    between two kernels' pages of the same shape) and by stall reason."""
    total = sum(num(r, key) for r in rows) or 1.0
    reasons = [x for x in REASONS if "stall_" + x in rows[0]]
    print(f"\nstretches between landmarks holding >= {min_share} % of the samples (address order; k = 1000 samples):")
    print("  share      k     n  execs(M) " + " ".join(f"{x[:8]:>8}" for x in reasons) + "  HGMMA MUFU LDS STS  first instruction")
    for a, b in stretches(rows):
        seg = rows[a:b]
        n = sum(num(r, key) for r in seg)
        if 100 * n / total < min_share:
            continue
        ops = Counter(opcode(r.get("Source", "").strip())[0] for r in seg)
        execs = max(num(r, "Instructions Executed") for r in seg) / 1e6
        by = " ".join(f"{sum(num(r, 'stall_' + x) for r in seg) / 1e3:8.1f}" for x in reasons)
        print(f"  {100 * n / total:5.1f} % {n / 1e3:6.1f} {len(seg):5d} {execs:8.2f}  {by}  {ops['HGMMA']:5d} {ops['MUFU']:4d}"
              f" {ops['LDS']:3d} {ops['STS']:3d}  {str(seg[0].get('Address', ''))[-6:]:>6} {seg[0].get('Source', '').strip()[:60]}")


def main(path, with_segments=False):
    rows = read_page(path)
    if not rows:
        print("no source table in", path)
        return
    cols = list(rows[0].keys())
    samp = [c for c in cols if "Sampl" in c]
    print("columns:", ", ".join(cols))
    if not samp:
        return
    key = samp[0]
    total = sum(num(r, key) for r in rows) or 1.0
    print(f"\n{key}: {total:.0f} samples over {len(rows)} instructions")
    by_op = Counter()
    for r in rows:
        by_op[opcode(r.get("Source", "").strip())[0]] += num(r, key)
    print("\nby opcode (share of samples):")
    for op, n in by_op.most_common(20):
        print(f"  {op:12s} {100 * n / total:5.1f} %")
    print("\ntop instructions:")
    extra = samp[1:3]
    for r in sorted(rows, key=lambda r: -num(r, key))[:45]:
        ex = " ".join(f"{num(r, c):7.0f}" for c in extra)
        print(f"  {100 * num(r, key) / total:5.1f} % {ex} {r.get('Address', ''):>6} {r.get('Source', '').strip()[:90]}")
    if with_segments:
        segments(rows, key)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python3 -m tools.sm90.ncu_source",
                                 description="where an Nsight Compute source page's stall samples fall")
    ap.add_argument("--segments", action="store_true", help="also the samples by stretch between landmarks")
    ap.add_argument("csv", help="ncu -i report.ncu-rep --page source --csv --print-source sass > sass.csv")
    args = ap.parse_args()
    main(args.csv, args.segments)
