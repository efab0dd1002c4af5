"""Summarises an Nsight Compute source page (SASS, CSV) of the Hopper kernel: where the warp
stall samples fall, by instruction and by opcode, and the consumer loop's share.

    ncu -i report.ncu-rep --page source --csv --print-source sass > sass.csv
    python3 -m tools.sm90.ncu_source sass.csv
"""
import argparse
import csv
import re
from collections import Counter


def main(path):
    with open(path, newline="") as f:
        text = f.read()
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if "Source" in l and "Address" in l), None)
    if start is None:
        print("no source table in", path)
        print("\n".join(lines[:20]))
        return
    rows = list(csv.DictReader(lines[start:]))
    cols = list(rows[0].keys())
    samp = [c for c in cols if "Sampl" in c]
    print("columns:", ", ".join(cols))
    if not samp:
        return
    key = samp[0]

    def num(r, c):
        try:
            return float(str(r.get(c, "0")).replace(",", "") or 0)
        except ValueError:
            return 0.0

    total = sum(num(r, key) for r in rows) or 1.0
    print(f"\n{key}: {total:.0f} samples over {len(rows)} instructions")
    by_op = Counter()
    for r in rows:
        src = r.get("Source", "").strip()
        m = re.match(r"(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(\.[A-Z0-9_.]*)?", src)
        by_op[m.group(2) if m else src[:12]] += num(r, key)
    print("\nby opcode (share of samples):")
    for op, n in by_op.most_common(20):
        print(f"  {op:12s} {100 * n / total:5.1f} %")
    print("\ntop instructions:")
    extra = samp[1:3]
    for r in sorted(rows, key=lambda r: -num(r, key))[:45]:
        ex = " ".join(f"{num(r, c):7.0f}" for c in extra)
        print(f"  {100 * num(r, key) / total:5.1f} % {ex} {r.get('Address', ''):>6} {r.get('Source', '').strip()[:90]}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python3 -m tools.sm90.ncu_source",
                                 description="where an Nsight Compute source page's stall samples fall")
    ap.add_argument("csv", help="ncu -i report.ncu-rep --page source --csv --print-source sass > sass.csv")
    main(ap.parse_args().csv)
