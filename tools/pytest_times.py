"""A pytest plugin that appends each test's outcome and duration to a file as it finishes, so that a run
cut short by a time limit still says where its time went (pytest's --durations prints only at the end).

    FA_TEST_TIMES=/path/times.tsv python3 -m pytest -p tools.pytest_times tests ...

Each line: nodeid, phase outcome ("passed", "failed", "skipped"), seconds (setup + call + teardown).
Workers of pytest-xdist append to the same file (one short write per line); their controller,
which sees the same reports again, writes nothing.
"""
import os

_path = os.environ.get("FA_TEST_TIMES")
_acc = {}


def pytest_configure(config):
    global _path
    if config.pluginmanager.hasplugin("dsession"):     # the xdist controller
        _path = None


def pytest_runtest_logreport(report):
    if not _path:
        return
    total, outcome = _acc.get(report.nodeid, (0.0, "passed"))
    total += report.duration
    if report.outcome != "passed":
        outcome = report.outcome
    _acc[report.nodeid] = (total, outcome)
    if report.when == "teardown":
        del _acc[report.nodeid]
        with open(_path, "a") as f:
            f.write(f"{report.nodeid}\t{outcome}\t{total:.3f}\n")
