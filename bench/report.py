# Renders a benchmark result (the JSON written by bench/attention.py) as a markdown table, a short
# summary table and a PNG plot. Used by bench/attention.py after a run and by bench/readme_table.py
# for the README and docs/, so the tables there and the one beside the JSON are the same text. No
# command line of its own.


# Other projects' kernels (bench/attention.py's optional providers): baselines beside SDPA's backends.
PEERS = ("fa3", "fa4")
# The peers a point's "best" ratio compares against: the fast fused kernels, not the reference paths.
BEST_OF = ("fa3", "fa4", "sdpa-cudnn", "sdpa-flash")


def ours(names):
    return [n for n in names if n.startswith("fa") and n not in PEERS]


def baselines(names):
    """SDPA's backends and the peers; with a peer, "best" (the fastest of BEST_OF at each point)."""
    base = [n for n in names if n.startswith("sdpa") or n in PEERS]
    return base + (["best"] if any(n in PEERS for n in names) else [])


def tflops(res, name):
    """A provider's TFLOP/s at a point (res: its results), "best" the fastest of BEST_OF; None if none ran."""
    if name == "best":
        ran = [res[n]["tflops"] for n in BEST_OF if "tflops" in res.get(n, {})]
        return max(ran) if ran else None
    return res.get(name, {}).get("tflops")


def _n(n):
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def summary(result):
    """Per (ours, baseline) pair: geometric mean, min and max of the speed ratio over the points
    where both ran, as {(a, b): (geomean, min, max, count)}."""
    import math
    names = result["providers"]
    out = {}
    for a in ours(names):
        for b in baselines(names):
            ratios = [tflops(p["results"], a) / tflops(p["results"], b) for p in result["points"]
                      if tflops(p["results"], a) and tflops(p["results"], b)]
            if ratios:
                geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
                out[(a, b)] = (geo, min(ratios), max(ratios), len(ratios))
    return out


def _num(x):
    return f"{x:.0f}" if x >= 1000 else f"{x:.3g}"


def markdown(result):
    """The table: a row per shape point, TFLOP/s per provider, fa/sdpa ratios, fa's errors."""
    names = result["providers"]
    mine, base = ours(names), baselines(names)
    header = (["dtype", "d", "causal", "B×H", "N"] + names + [f"{a}/{b}" for a in mine for b in base]
              + [c for a in mine for c in (f"{a} err", f"{a} err/sdpa")])
    footnotes = {}  # (provider, reason) -> number

    def cell(name, r):
        if "na" in r:
            return f"n/a ({footnotes.setdefault((name, r['na']), len(footnotes) + 1)})"
        return _num(r["tflops"])

    rows = []
    for p in result["points"]:
        res = p["results"]
        heads = str(p["Hq"]) if p["Hq"] == p["Hkv"] else f"{p['Hq']}/{p['Hkv']}"
        row = [p["dtype"], str(p["d"]), "yes" if p["causal"] else "no", f"{p['B']}×{heads}", _n(p["N"])]
        row += [cell(n, res[n]) for n in names]
        row += [f"{tflops(res, a) / tflops(res, b):.2f}" if tflops(res, a) and tflops(res, b)
                else "–" for a in mine for b in base]
        for a in mine:
            err, ratio = res[a].get("max_err"), res[a].get("err_ratio")
            row += ["–" if err is None else f"{err:.1e}", "–" if ratio is None else f"{ratio:.2f}"]
        rows.append(row)

    commit = (result.get("git_commit") or "unknown")[:12]
    lines = [
        f"Attention forward on {result['device']}, torch {result['torch']}, {result['date'][:10]}, "
        f"commit {commit}: `{result['command']}`",
        "",
        "TFLOP/s = 4·B·H·N²·d / time, halved when causal; time: " + result["timer"] + ". "
        "`a/b`: speed ratio, above 1 when a is faster. "
        + ("`best`: the fastest of " + ", ".join(f"`{n}`" for n in BEST_OF if n in names) + " at the point. "
           if "best" in base else "")
        + f"`err`: max |out − ref|, ref = {result['reference']}; "
        "`err/sdpa`: that error over the smallest same-dtype SDPA error (FlashAttention's test rule: ≤ 2).",
        "",
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" for _ in header) + " |",
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
        *(f"Speed `{a}/{b}`: geometric mean **{g:.2f}×** over {n} points (min {lo:.2f}, max {hi:.2f})."
          for (a, b), (g, lo, hi, n) in summary(result).items()),
    ]
    lines += notes(result, names, footnotes)
    return "\n".join(lines) + "\n"


def summary_markdown(result, split_n=2048):
    """A short table: for each head dim, mask and length band (N below split_n, and from it), the
    range of fa's TFLOP/s and the geometric mean (min–max) of fa's speed ratio to each SDPA
    baseline, over every dtype of the result; then the same over all points."""
    import math
    names = result["providers"]
    base = baselines(names)
    points = [p for p in result["points"] if "tflops" in p["results"].get("fa", {})]

    def band(p):
        return p["N"] >= split_n

    def row(label, pts, bold=False):
        ns = sorted({p["N"] for p in pts})
        tf = [p["results"]["fa"]["tflops"] for p in pts]
        cells = list(label) + [f"{_n(ns[0])}–{_n(ns[-1])}" if len(ns) > 1 else _n(ns[0]),
                               f"{_num(min(tf))}–{_num(max(tf))}"]
        for b in base:
            rs = [p["results"]["fa"]["tflops"] / tflops(p["results"], b) for p in pts if tflops(p["results"], b)]
            if not rs:
                cells.append("–")
                continue
            geo = math.exp(sum(map(math.log, rs)) / len(rs))
            mean = f"**{geo:.2f}×**" if bold else f"{geo:.2f}×"
            cells.append(f"{mean} ({min(rs):.2f}–{max(rs):.2f})")
        return "| " + " | ".join(cells) + " |"

    header = ["d", "causal", "N", "fa TFLOP/s"] + [f"fa/{b}" for b in base]
    groups = {}
    for p in points:
        groups.setdefault((p["d"], p["causal"], band(p)), []).append(p)
    dtypes = sorted({p["dtype"] for p in points})
    tokens = {p["B"] * p["N"] for p in points}
    hidden = {p["Hq"] * p["d"] for p in points}
    grid = (f", B·N = {_n(tokens.pop())} tokens, H·d = {hidden.pop()}" if len(tokens) == 1 and len(hidden) == 1
            else "")
    commit = (result.get("git_commit") or "unknown")[:12]
    lines = [
        f"Attention forward on {result['device']}, torch {result['torch']}, {result['date'][:10]}, "
        f"commit {commit}; {' and '.join(dtypes)}{grid}. TFLOP/s = 4·B·H·N²·d / time, halved when causal; "
        "`fa/x`: geometric mean of the speed ratio over the dtypes and lengths of the row, above 1 when fa "
        "is faster, (min–max).",
        "",
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" for _ in header) + " |",
        *(row((str(d), "yes" if c else "no"), pts) for (d, c, _), pts in sorted(groups.items())),
        row(("all", ""), points, bold=True),
        "",
        *(f"- `{n}`: {result['provider_notes'][n]}" for n in names),
    ]
    return "\n".join(lines) + "\n"


def notes(result, names, footnotes):
    """Markdown lines: a note per provider, then the n/a footnotes ((provider, reason) -> number)."""
    lines = ["", *(f"- `{n}`: {result['provider_notes'][n]}" for n in names)]
    if footnotes:
        lines += ["", "n/a:", "", *(f"- ({i}) `{n}`: {why}" for (n, why), i in footnotes.items())]
    return lines


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None (with a message) when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
        return None
    return plt


def n_axis(ax, points, title):
    """A panel over N: log2 axis ticked at the points' N, y from 0, grid, title."""
    ns = sorted({p["N"] for p in points})
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns, [_n(n) for n in ns])
    ax.minorticks_off()
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10)


def plot(result, path):
    """TFLOP/s against N, a panel per (dtype, d) row and causal column. False if matplotlib is missing."""
    plt = pyplot()
    if plt is None:
        return False
    names = result["providers"]
    panels = {}
    for p in result["points"]:
        panels.setdefault((p["dtype"], p["d"]), {}).setdefault(p["causal"], []).append(p)
    causals = sorted({p["causal"] for p in result["points"]})
    fig, axes = plt.subplots(len(panels), len(causals), squeeze=False, sharex=True,
                             figsize=(4.5 * len(causals), 2.8 * len(panels)))
    handles = {}
    for i, ((dtype, d), by_causal) in enumerate(panels.items()):
        for j, causal in enumerate(causals):
            ax = axes[i][j]
            points = by_causal.get(causal, [])
            for k, name in enumerate(names):
                xy = [(p["N"], p["results"][name]["tflops"]) for p in points
                      if "tflops" in p["results"][name]]
                if xy:
                    handles[name], = ax.plot(*zip(*xy), marker="o", color=f"C{k}", label=name)
            n_axis(ax, points, f"{dtype} d={d} {'causal' if causal else 'non-causal'}")
    fig.supxlabel("N")
    fig.supylabel("TFLOP/s")
    fig.suptitle(f"attention forward, {result['device']}", fontsize=11)
    axes[0][0].legend(list(handles.values()), list(handles), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True
