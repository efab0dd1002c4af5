#!/usr/bin/env bash
# The whole test suite on a GPU machine in one command: every test on WORKERS pytest-xdist workers
# (default 16), except those with tensors past 2^31 elements (tens of GiB each), which then run one
# at a time. Prints pytest's summary line of each pass; exits non-zero if either fails. Each worker
# runs its CPU work on one thread (OMP_NUM_THREADS=1 unless set): 16 workers each spinning 16
# OpenMP threads made the CPU cases and the references several times slower. FA_FAILURES=<file>
# appends each failing test's id as it fails (conftest.py), for runs a time limit may cut short.
#
#     bash tests/gpu.sh                # after: pip install --no-build-isolation --no-deps -e .
set -uo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
python3 -m pytest -q -n "${WORKERS:-16}" -p no:cacheprovider -rfE --tb=short tests -k "not 2g_elements"
a=$?
python3 -m pytest -q -p no:cacheprovider -rfE --tb=short tests/test_extreme.py -k "2g_elements"
b=$?
exit $(( a || b ))
