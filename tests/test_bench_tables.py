"""The benchmark tables of README.md and docs/*.md are generated from the committed results in
bench/results/ (bench/readme_table.py): none may be edited by hand or left behind its result."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_readme_and_docs_tables_match_the_results():
    results = sorted(str(p) for p in (REPO / "bench" / "results").glob("*.json")) + \
        sorted(str(p) for p in (REPO / "bench" / "results").glob("*.md"))
    run = subprocess.run([sys.executable, "-m", "bench.readme_table", *results, "--check"], cwd=REPO,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("up to date"), run.stdout
