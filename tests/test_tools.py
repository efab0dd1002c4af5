"""The Nsight Compute page summary (tools/sm90/ncu_source.py) on pages committed under bench/log/: its
stretches cover every instruction once, so the stretch table adds up to the page's samples. tune.py's
rounds: every column once a round, each column first in one of them. sass_same.py's comparison."""
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


def test_sass_same_compares_instructions_only():
    """tools/sass_same.py: two kernels compare equal when only their addresses and encodings differ,
    and unequal when one instruction differs."""
    from tools import sass_same
    a = """
        Function : _Z1kv
        /*0000*/                   MOV R1, c[0x0][0x28] ;               /* 0x00000a0000017a02 */
                                                                        /* 0x000fe40000000f00 */
        /*0010*/                   EXIT ;                               /* 0x000000000000794d */
        Function : _Z1jv
        /*0000*/                   FADD R2, R2, R3 ;                    /* 0x0000000302027221 */
    """
    b = a.replace("0x000fe40000000f00", "0x000fc40000000f00").replace("/*0010*/", "/*0020*/")
    c = a.replace("FADD R2, R2, R3", "FMUL R2, R2, R3")
    ka, kb, kc = (sass_same.kernel_sass(x) for x in (a, b, c))
    assert set(ka) == {"_Z1kv", "_Z1jv"} and ka == kb
    assert kc["_Z1kv"] == ka["_Z1kv"] and kc["_Z1jv"] != ka["_Z1jv"]
