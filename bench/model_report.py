# Renders the model-level result (the JSON written by bench/model.py) as markdown and a PNG plot.
# Used by bench/model.py after a run and by bench/readme_table.py for the README's "Model-level
# benchmark" section, so both show the same text. Torch-free; no command line of its own.
import math

from bench.report import _n, _num, n_axis, notes, pyplot


def _baselines(result):
    return [n for n in result["providers"] if n != "fa" and n != "none"]


def _speedup(res, base):
    """Time of `base` over time of fa: above 1 when fa is faster; None where either did not run."""
    if "ms" in res.get("fa", {}) and "ms" in res.get(base, {}):
        return res[base]["ms"] / res["fa"]["ms"]
    return None


def _share(res):
    """Attention's share of fa's prefill time: (t_fa − t_none) / t_fa."""
    if "ms" in res.get("fa", {}) and "ms" in res.get("none", {}):
        return max(0.0, 1 - res["none"]["ms"] / res["fa"]["ms"])
    return None


def _params(n):
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"


def _geo(xs):
    xs = [x for x in xs if x is not None]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def _table(header, rows):
    return ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |",
            *("| " + " | ".join(r) + " |" for r in rows)]


def summary_rows(result):
    """Per prefill N: geometric mean over batch sizes of fa's end-to-end speedup vs each baseline,
    and the range of attention's share of fa's time."""
    rows = []
    for N in sorted({p["N"] for p in result["prefill"]}):
        points = [p for p in result["prefill"] if p["N"] == N]
        shares = [s for s in (_share(p["results"]) for p in points) if s is not None]
        row = [_n(N), ", ".join(str(p["B"]) for p in points)]
        for b in _baselines(result):
            ran = {p["B"]: s for p in points if (s := _speedup(p["results"], b)) is not None}
            g = _geo(ran.values())
            over = "" if len(ran) == len(points) else f" (B = {', '.join(map(str, ran))})"
            row.append("–" if g is None else f"{g:.2f}×{over}")
        row.append("–" if not shares else f"{min(shares):.0%}–{max(shares):.0%}" if len(shares) > 1
                   else f"{shares[0]:.0%}")
        rows.append(row)
    return rows


def markdown(result):
    cfg, names = result["config"], result["providers"]
    baselines = _baselines(result)
    commit = (result.get("git_commit") or "unknown")[:12]
    footnotes = {}

    def cell(name, r, key, fmt):
        if "na" in r:
            return f"n/a ({footnotes.setdefault((name, r['na']), len(footnotes) + 1)})"
        return fmt(r[key])

    lines = [
        f"Model-level inference on {result['device']}, torch {result['torch']}, {result['date'][:10]}, "
        f"commit {commit}: `{result['command']}`",
        "",
        f"Model: {result['config_name']}, a Llama-style decoder in plain PyTorch "
        f"({_params(result['parameters'])} parameters: hidden {cfg['hidden']}, {cfg['layers']} layers, "
        f"{cfg['heads']} query / {cfg['kv_heads']} KV "
        f"heads of dim {cfg['head_dim']}, SwiGLU {cfg['intermediate']}, vocab {cfg['vocab']}, tied embeddings), "
        f"{result['dtype']}, random weights; only attention changes between columns. "
        f"Time: {result['timer']}. `fa/x` = time of x / time of fa, above 1 when fa is faster.",
        "",
    ]
    if result["prefill"]:
        lines += ["**Prefill, end to end** (one forward over B × N tokens, logits of the last token), "
                  "fa's speedup, geometric mean over the batch sizes (those a baseline ran, where named); "
                  "`attention share`: attention's part of fa's time, measured against the same model with "
                  "attention skipped (`none`):", ""]
        lines += _table(["N", "B"] + [f"fa/{b}" for b in baselines] + ["attention share"], summary_rows(result))
        lines += ["", "**Prefill**, ms per forward (fa's tokens/s):", ""]
        rows = []
        for p in result["prefill"]:
            res = p["results"]
            row = [str(p["B"]), _n(p["N"])]
            row += [cell(n, res[n], "ms", _num) for n in names]
            fa = res.get("fa", {})
            row.append(f"{fa['tokens_per_s'] / 1e3:.3g}k" if "tokens_per_s" in fa else "–")
            row += [f"{s:.2f}" if (s := _speedup(res, b)) is not None else "–" for b in baselines]
            share = _share(res)
            row.append("–" if share is None else f"{share:.0%}")
            rows.append(row)
        lines += _table(["B", "N"] + names + ["fa tok/s"] + [f"fa/{b}" for b in baselines] + ["attention share"],
                        rows)
        calls = [p["fa_calls"] for p in result["prefill"] if "fa_calls" in p]
        if calls:
            fallbacks = sum(c["sdpa_fallback"] for c in calls)
            lines += ["", f"fa's attention calls: {sum(c['kernel'] for c in calls)} ran the kernel, "
                          f"{fallbacks} fell back to PyTorch's SDPA."]
    if result["decode"]:
        dec_names = [n for n in names if n != "none"]
        lines += ["", f"**Greedy decode**, tokens/s (B × new tokens / time of the decode steps, prefill "
                      f"excluded; eager PyTorch, no CUDA graphs; `fa ms/step`: one step, B tokens). Ours: "
                      f"{result['decode_path']}.", ""]
        rows = []
        for p in result["decode"]:
            res = p["results"]
            row = [str(p["B"]), _n(p["prompt"]), str(p["new_tokens"])]
            row += [cell(n, res[n], "tokens_per_s", _num) for n in dec_names]
            fa = res.get("fa", {})
            row.append(f"{fa['ms_per_step']:.3g}" if "ms_per_step" in fa else "–")
            row += [f"{s:.2f}" if (s := _speedup(res, b)) is not None else "–" for b in baselines]
            rows.append(row)
        lines += _table(["B", "prompt", "new"] + dec_names + ["fa ms/step"] + [f"fa/{b}" for b in baselines],
                        rows)
    acc = result.get("accuracy")
    if acc:
        lines += ["", f"**Accuracy** (before timing; B = {acc['batch']}, {acc['prompt']}-token prompt, "
                      f"{acc['steps']} decode steps): max |logit − reference| over every prefill position and "
                      f"over the teacher-forced decode steps; the reference runs the same model with attention "
                      f"computed in float64 (max |logit| {acc['max_abs_logit']:.3g}). `greedy`: sequences whose "
                      f"greedy tokens equal the reference's.", ""]
        rows = [[n, cell(n, r, "prefill_err", lambda x: f"{x:.2e}"), cell(n, r, "decode_err", lambda x: f"{x:.2e}"),
                 cell(n, r, "greedy_identical", lambda x, r=r: f"{x}/{r['greedy_of']}")]
                for n, r in acc["providers"].items()]
        lines += _table(["provider", "prefill err", "decode err", "greedy"], rows)
        if "fa_ok" in acc:
            lines += ["", f"fa's error is {'within' if acc['fa_ok'] else '**outside**'} 2 × the best SDPA "
                          f"backend's error plus 1e-5 (fp32) or 1e-3 (fp16, bf16) × max |logit|: "
                          f"{acc['fa_bound']:.2e}."]
    lines += notes(result, names, footnotes)
    return "\n".join(lines) + "\n"


def plot(result, path):
    """fa's prefill speedup vs each baseline over N, a panel per batch size. False without matplotlib."""
    plt = pyplot()
    if plt is None:
        return False
    batches = sorted({p["B"] for p in result["prefill"]})
    if not batches:
        return False
    baselines = _baselines(result)
    fig, axes = plt.subplots(1, len(batches), squeeze=False, sharey=True, figsize=(3.6 * len(batches), 3.4))
    handles = {}
    for ax, B in zip(axes[0], batches):
        points = [p for p in result["prefill"] if p["B"] == B]
        for k, b in enumerate(result["providers"]):
            if b not in baselines:
                continue
            xy = [(p["N"], s) for p in points if (s := _speedup(p["results"], b)) is not None]
            if xy:
                handles[f"vs {b}"], = ax.plot(*zip(*xy), marker="o", color=f"C{k}")
        ax.axhline(1.0, color="black", lw=0.8)
        n_axis(ax, points, f"B = {B}")
    fig.supxlabel("prompt length N")
    fig.supylabel("end-to-end prefill speedup of fa")
    fig.suptitle(f"{result['config_name']} prefill, {result['dtype']}, {result['device']}", fontsize=11)
    if handles:
        axes[0][0].legend(list(handles.values()), list(handles), fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True
