"""The Nsight Compute page summary (tools/sm90/ncu_source.py) on pages committed under bench/log/: its
stretches cover every instruction once, so the stretch table adds up to the page's samples. tune.py's
rounds: every column once a round, each column first in one of them."""
import pathlib

import pytest

from tools.sm90 import ncu_source, tune

PAGES = sorted((pathlib.Path(__file__).resolve().parents[1] / "bench/log/2026-12-04-bwd-ncu-source").glob("*_sass.csv.gz"))
KEY = "Warp Stall Sampling (All Samples)"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name.split("_n4096")[0])
def test_stretches_cover_the_page(page):
    rows = ncu_source.read_page(str(page))
    spans = ncu_source.stretches(rows)
    assert spans[0][0] == 0 and spans[-1][1] == len(rows)
    assert all(a < b for a, b in spans) and all(b == c for (_, b), (c, _) in zip(spans, spans[1:]))
    total = sum(ncu_source.num(r, KEY) for r in rows)
    assert sum(ncu_source.num(r, KEY) for a, b in spans for r in rows[a:b]) == total


def test_our_d64_page():
    """The figures bench/LOG.md (2026-12-04-bwd-ncu-source) quotes for our d = 64 kernel."""
    page = next(p for p in PAGES if p.name.startswith("ncu_src_backward_d64"))
    rows = ncu_source.read_page(str(page))
    assert sum(ncu_source.num(r, KEY) for r in rows) == 157427
    mufu = [a for a, b in ncu_source.stretches(rows) if sum(ncu_source.opcode(r["Source"].strip())[0] == "MUFU" for r in rows[a:b]) == 128]
    assert len(mufu) == 1                # the exponentials of both loops (unmasked and masked) in one stretch
    assert rows[mufu[0]]["Source"].strip().startswith("WARPGROUP.DEPBAR.LE gsb0, 0x1")


def test_tune_rounds_rotate_the_columns():
    columns = ["auto", "tile", "cudnn", "bn128s2c2p1"]
    orders = [tune.rotated(range(len(columns)), r) for r in range(len(columns))]
    assert all(sorted(o) == list(range(len(columns))) for o in orders)
    assert sorted(o[0] for o in orders) == list(range(len(columns)))
    assert tune.rotated(range(3), 4) == [1, 2, 0] and tune.rotated([], 2) == []
