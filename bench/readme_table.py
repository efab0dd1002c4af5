# Regenerates the README's benchmark tables from committed results, so no table is typed by hand.
# For bench/results/<name>.json it rewrites the text between the markers
#   <!-- bench:<name>:start -->
#   <!-- bench:<name>:end -->
# in README.md with the table bench/attention.py wrote beside that JSON (bench/report.py renders both;
# bench/model_report.py renders bench/model.py's results).
#
#   python3 -m bench.readme_table bench/results/cpu.json            # rewrite the section
#   python3 -m bench.readme_table bench/results/model.json          # the "Model-level benchmark" one
#   python3 -m bench.readme_table bench/results/*.json --check     # exit 1 if the README is stale
import argparse
import json
import sys
from pathlib import Path

from bench import model_report, report

REPO = Path(__file__).resolve().parent.parent


def rewrite(text, name, table):
    """text with the section between the markers of `name` replaced by `table`."""
    start, end = f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"
    i = text.find(start)
    j = text.find(end, i + 1)
    if i < 0 or j < 0:
        raise SystemExit(f"README has no section {start} ... {end}: add the two markers where the table goes")
    return text[:i + len(start)] + "\n" + table + text[j:]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m bench.readme_table",
                                 description="Rewrite README sections from benchmark JSON results.")
    ap.add_argument("results", nargs="+", type=Path, help="bench/results/<name>.json (or .md) files")
    ap.add_argument("--readme", type=Path, default=REPO / "README.md")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a section is out of date")
    args = ap.parse_args(argv)

    if not args.readme.exists():
        sys.exit(f"{args.readme} does not exist")
    old = args.readme.read_text()
    new = old
    absent = []
    for path in args.results:
        if args.check and f"<!-- bench:{path.stem}:start -->" not in old:
            absent.append(path.stem)             # --check over a glob: results the README does not show
            continue
        # A JSON result is rendered by bench/report.py (bench/model_report.py for bench/model.py's);
        # a markdown result (bench/memory.py, tools/ptxas.py) is taken as it is, and so is the
        # markdown bench/decode.py writes beside its JSON.
        if path.suffix == ".md":
            table = path.read_text()
        else:
            result = json.loads(path.read_text())
            if result.get("kind") == "model":
                table = model_report.markdown(result)
            elif "providers" in result:
                table = report.markdown(result)
            elif path.with_suffix(".md").exists():
                table = path.with_suffix(".md").read_text()
            else:
                sys.exit(f"{path}: not a bench/attention.py or bench/model.py result, and no "
                         f"{path.with_suffix('.md').name} beside it")
        new = rewrite(new, path.stem, table)
    if args.check:
        if new != old:
            sys.exit(f"{args.readme} is out of date: run python3 -m bench.readme_table "
                     + " ".join(str(p) for p in args.results if p.stem not in absent))
        print(f"{args.readme} is up to date" + (f" (not shown there: {', '.join(absent)})" if absent else ""))
    elif new != old:
        args.readme.write_text(new)
        print(f"rewrote {args.readme}: " + ", ".join(p.stem for p in args.results))
    else:
        print(f"{args.readme} already up to date")


if __name__ == "__main__":
    main()
