"""Structured post-training's report: the table (``results.md``) and the figure (``perplexity_vs_removed.png``:
C4 and WikiText-2 perplexity against the removed share, one line per method, dense as the reference), both
written by ``glue-sparse posttrain`` from its rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from glue_sparse.common.colours import method_colour
from glue_sparse.common.figures import save_figure

CORPORA = ("c4", "wikitext2")
FIGURE = "perplexity_vs_removed.png"


def structured_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The table: one row per cell, perplexities with their ratio to dense."""
    dense = next((r for r in rows if r["method"] == "dense"), None)
    lines = []
    if dense is not None:
        scored, calibration = dense["setting"]["scored"], dense["setting"]["calibration"]
        c4, wiki = scored["c4"], scored["wikitext2"]
        lines += [f"Model: {dense['model']}.", "",
                  f"Perplexity: {c4['protocol']} protocol, {c4['n_samples']} windows of {c4['seqlen']} tokens "
                  f"({c4['n_samples'] * c4['seqlen']:,} tokens) per corpus: C4 documents {c4['documents']} of "
                  f"{c4['source']}, WikiText-2 test ({wiki['source']}), each joined with spaces. Calibration "
                  f"(one-shot methods): {calibration['samples']} blocks of {calibration['seqlen']} tokens from "
                  f"{calibration['source']}; unit gates train on blocks of the same documents. Removed shares are "
                  "of decoder-block linear weights, and of all parameters net of what a method adds (FLAP's biases).",
                  ""]
    lines += ["| method | target | removed % block linears | removed % total (net) | C4 ppl | x dense | WikiText-2 ppl "
             "| x dense | calibration / training tokens | wall s | tokens/s x dense |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        a, ppl = r["accounting"], r["perplexity"]
        ratio = {c: ppl[c] / dense["perplexity"][c] if dense else float("nan") for c in CORPORA}
        tokens = r.get("train", {}).get("train_tokens", r.get("calibration_tokens", 0))
        target = "-" if r["target_removal"] is None else f"{r['target_removal']:.0%}"
        lines.append(f"| {r['method']} | {target} | {a['removed_share_of_gated']:.1%} "
                     f"| {a['net_removed_share_of_total']:.1%} "
                     f"| {ppl['c4']:.2f} | {ratio['c4']:.2f} | {ppl['wikitext2']:.2f} | {ratio['wikitext2']:.2f} "
                     f"| {tokens:,} | {r['wall_seconds']:.0f} | {r['tokens_per_second']['ratio']:.2f} |")
    return "\n".join(lines) + "\n"


def plot_structured(rows: Sequence[dict[str, Any]], path: Path) -> Path | None:
    """The figure, written atomically to ``path``; None without a dense row to compare with."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dense = next((r for r in rows if r["method"] == "dense"), None)
    if dense is None:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), dpi=120)
    for ax, corpus, title in zip(axes, CORPORA, ("C4", "WikiText-2")):
        for method in dict.fromkeys(r["method"] for r in rows if r["method"] != "dense"):
            mine = sorted((r for r in rows if r["method"] == method), key=lambda r: r["target_removal"])
            ax.plot([100 * r["accounting"]["removed_share_of_gated"] for r in mine],
                    [r["perplexity"][corpus] for r in mine], marker="o", color=method_colour(method), label=method)
        ax.axhline(dense["perplexity"][corpus], color=method_colour("dense"), lw=1, label="dense")
        ax.set_yscale("log")
        ax.margins(x=0.08, y=0.08)
        ax.set_title(f"{title} perplexity", fontsize=10)
        ax.set_xlabel("% of decoder-block linear weights removed")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=8)
    fig.suptitle(dense["model"].split(" (")[0], fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path)
