# Regenerates the benchmark tables of README.md and docs/*.md from committed results, so no table is
# typed by hand. For bench/results/<name>.json it rewrites, in every file that has them, the text
# between the markers
#   <!-- bench:<name>:start -->          ...  <!-- bench:<name>:end -->           the full table
#   <!-- bench:<name>:summary:start -->  ...  <!-- bench:<name>:summary:end -->   the short summary
# with the table bench/attention.py wrote beside that JSON (bench/report.py renders both;
# bench/model_report.py renders bench/model.py's results). A markdown result (bench/memory.py,
# tools/ptxas.py, the .md bench/decode.py writes beside its JSON) is taken as it is.
#
#   python3 -m bench.readme_table bench/results/cpu.json            # rewrite that result's sections
#   python3 -m bench.readme_table bench/results/model.json          # the model benchmark's
#   python3 -m bench.readme_table bench/results/*.json bench/results/*.md --check   # exit 1 if stale
import argparse
import json
import sys
from pathlib import Path

from bench import model_report, report

REPO = Path(__file__).resolve().parent.parent


def rewrite(text, marker, table):
    """text with the section between the markers `marker` replaced by `table` (unchanged if absent)."""
    start, end = f"<!-- bench:{marker}:start -->", f"<!-- bench:{marker}:end -->"
    i = text.find(start)
    if i < 0:
        return text
    j = text.find(end, i + 1)
    if j < 0:
        raise SystemExit(f"{start} without {end}")
    return text[:i + len(start)] + "\n" + table + text[j:]


def tables(path):
    """{marker: table} for one result file."""
    if path.suffix == ".md":       # a table bench/attention.py or bench/model.py wrote beside its JSON:
        if path.with_suffix(".json").exists():  # the JSON renders it (and its summary)
            return tables(path.with_suffix(".json"))
        return {path.stem: path.read_text()}
    result = json.loads(path.read_text())
    if result.get("kind") == "model":
        return {path.stem: model_report.markdown(result)}
    if "providers" in result:   # the summary is fa's (a result of forced families only has none)
        out = {path.stem: report.markdown(result)}
        if "fa" in result["providers"]:
            out[f"{path.stem}:summary"] = report.summary_markdown(result)
        return out
    if path.with_suffix(".md").exists():
        return {path.stem: path.with_suffix(".md").read_text()}
    sys.exit(f"{path}: not a bench/attention.py or bench/model.py result, and no "
             f"{path.with_suffix('.md').name} beside it")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m bench.readme_table",
                                 description="Rewrite the benchmark sections of README.md and docs/*.md "
                                             "from committed results.")
    ap.add_argument("results", nargs="+", type=Path, help="bench/results/<name>.json (or .md) files")
    ap.add_argument("--files", nargs="+", type=Path, help="files to rewrite (default: README.md, docs/*.md)")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a section is out of date")
    args = ap.parse_args(argv)

    files = args.files or [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    old = {f: f.read_text() for f in files if f.exists()}
    new = dict(old)
    shown = set()
    for path in args.results:
        for marker, table in tables(path).items():
            for f in new:
                text = rewrite(new[f], marker, table)
                if f"<!-- bench:{marker}:start -->" in new[f]:
                    shown.add(path)
                new[f] = text
    absent = [p.stem for p in args.results if p not in shown]
    if absent and not args.check:
        sys.exit(f"no section for {', '.join(absent)} in {', '.join(str(f) for f in new)}: add the markers "
                 "<!-- bench:<name>:start --> <!-- bench:<name>:end --> where the table goes")
    stale = [f for f in new if new[f] != old[f]]
    if args.check:
        if stale:
            sys.exit(f"out of date: {', '.join(str(f) for f in stale)}: run python3 -m bench.readme_table "
                     + " ".join(str(p) for p in args.results if p.stem not in absent))
        print("up to date" + (f" (not shown: {', '.join(absent)})" if absent else ""))
        return
    for f in stale:
        f.write_text(new[f])
    print("rewrote " + ", ".join(str(f) for f in stale) if stale else "already up to date")


if __name__ == "__main__":
    main()
