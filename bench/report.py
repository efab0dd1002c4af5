# Renders a benchmark result (the JSON written by bench/attention.py) as a markdown table and a PNG
# plot. Used by bench/attention.py after a run and by bench/readme_table.py for the README, so the
# table in the README and the one beside the JSON are the same text. No command line of its own.


def _n(n):
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def summary(result):
    """Per (ours, baseline) pair: geometric mean, min and max of the speed ratio over the points
    where both ran, as {(a, b): (geomean, min, max, count)}."""
    import math
    names = result["providers"]
    out = {}
    for a in (n for n in names if n.startswith("fa")):
        for b in (n for n in names if n.startswith("sdpa")):
            ratios = [p["results"][a]["tflops"] / p["results"][b]["tflops"] for p in result["points"]
                      if "tflops" in p["results"][a] and "tflops" in p["results"][b]]
            if ratios:
                geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
                out[(a, b)] = (geo, min(ratios), max(ratios), len(ratios))
    return out


def _num(x):
    return f"{x:.0f}" if x >= 1000 else f"{x:.3g}"


def markdown(result):
    """The table: a row per shape point, TFLOP/s per provider, fa/sdpa ratios, fa's errors."""
    names = result["providers"]
    ours = [n for n in names if n.startswith("fa")]
    baselines = [n for n in names if n.startswith("sdpa")]
    header = (["dtype", "d", "causal", "B×H", "N"] + names + [f"{a}/{b}" for a in ours for b in baselines]
              + [c for a in ours for c in (f"{a} err", f"{a} err/sdpa")])
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
        row += [f"{res[a]['tflops'] / res[b]['tflops']:.2f}" if "tflops" in res[a] and "tflops" in res[b]
                else "–" for a in ours for b in baselines]
        for a in ours:
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
        f"`err`: max |out − ref|, ref = {result['reference']}; "
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
