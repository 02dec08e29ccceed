"""The speed table's report: the issue targets as met/missed lines with margins, and the Markdown table
that ``glue-sparse speed`` and ``glue-sparse speed --causal`` write beside their JSON rows."""

from __future__ import annotations

from typing import Any, Sequence

from glue_sparse.common.colours import LAYOUT_COLOURS
from glue_sparse.common.targets import DEFAULT_SPEED_TARGETS as GOALS
from glue_sparse.common.figures import save_figure

# the targets' old module-level names (their numbers live in targets.json)
NEVER_SLOWER_LEVELS = GOALS.never_slower_levels
SPEEDUP_TARGET = (GOALS.speedup_level, GOALS.speedup_target)
IDEAL_SHARE_TARGET = (GOALS.ideal_share_levels, GOALS.ideal_share_target)


def speed_targets(rows: Sequence[dict[str, Any]], layout: str = "auto", batch_size: int = 32) -> list[str]:
    """Met/missed lines, with margins, for the random patterns of the default layout at batch 32."""
    mine = {round(r["closed_share_of_gated"], 2): r for r in rows
            if r["layout"] == layout and r["batch_size"] == batch_size and r["level"].startswith("random")}
    lines = []

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    def ratio(row: dict[str, Any]) -> str:  # the median and, when recorded, the range over rounds
        low, high = row.get("latency_ratio_low"), row.get("latency_ratio_high")
        rounds = f" (rounds {low:.2f}-{high:.2f})" if low is not None and high is not None else ""
        return f"{row['latency_ratio']:.2f}x{rounds}"

    for level in NEVER_SLOWER_LEVELS:
        if level in mine:
            x = mine[level]["latency_ratio"]
            lines.append(f"- never slower than dense at {level:.0%} closed: {ratio(mine[level])}, "
                         f"{verdict(x >= 1.0)} (margin {x - 1.0:+.2f})")
    level, target = SPEEDUP_TARGET
    if level in mine:
        x = mine[level]["latency_ratio"]
        lines.append(f"- >= {target}x at {level:.0%} closed: {ratio(mine[level])}, {verdict(x >= target)} "
                     f"(margin {x - target:+.2f})")
    levels, share = IDEAL_SHARE_TARGET
    for level in levels:
        if level in mine:
            got = mine[level]["share_of_ideal"]
            lines.append(f"- >= {share:.0%} of the ideal speed-up at {level:.0%} closed: {got:.0%}, "
                         f"{verdict(got >= share)} (margin {100 * (got - share):+.0f} points)")
    return [f"Targets ({layout} layout, batch {batch_size}, random patterns):", *lines] if lines else []


def built(row: dict[str, Any]) -> str:
    """The structure a row's pruned model has: index operations per forward, and "heads" when narrowed."""
    if row.get("index_ops") is None:
        return "-"
    return f"{row['index_ops']} ops" + (", heads" if row.get("heads_narrowed") else "")


def speed_markdown(rows: Sequence[dict[str, Any]], meta: dict[str, Any], targets: Sequence[str]) -> str:
    """The committed table: one line per (pattern, layout, batch), then the targets."""
    on = f"{meta.get('device', 'cpu')}, {meta.get('dtype', 'float32')}"  # tables before the flags were CPU fp32
    out = [f"# Dense vs pruned latency: {meta['model']}", "",
           f"Texts: {meta['texts']}; {on}; {meta['threads']} threads; {meta['batches']} batches x {meta['rounds']} "
           f"rounds (warm-up dropped), dense and every layout of a pattern timed in one loop, taking turns "
           "batch by batch (order reversed every other round); "
           "`latency x` is the median over rounds of the per-round dense / pruned time, `rounds` its slowest and "
           f"fastest round; `auto` chooses its layout for each batch size's token count; kept counts aligned to "
           f"{meta['align']}. `closed` = gated weights whose row or column the gates "
           "closed; `removed` = gated weights physically gone in that layout; `ideal` = the dense forward "
           "with each gated matrix timed shrunk to its open rows and columns (exact or rounded up to the alignment, "
           "whichever is faster), without index work; `built` = gathers plus scatters the pruned model runs "
           "per forward, and `heads` where attention runs narrowed per head (what `auto` picked).", "",
           "| pattern | layout | built | batch | closed % | removed % | dense ms | pruned ms | ideal ms | latency x | "
           "rounds | ideal x | of ideal | FLOP x |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['level']} | {r['layout']} | {built(r)} | {r['batch_size']} | "
                   f"{100 * r['closed_share_of_gated']:.1f} | "
                   f"{100 * r['removed_share_of_gated']:.1f} | {r['dense_ms']:.2f} | {r['pruned_ms']:.2f} | "
                   f"{r['ideal_ms']:.2f} | {r['latency_ratio']:.2f} | "
                   f"{r['latency_ratio_low']:.2f}-{r['latency_ratio_high']:.2f} | "
                   f"{r['dense_ms'] / r['ideal_ms']:.2f} | "
                   f"{100 * r['share_of_ideal']:.0f}% | {r['flop_ratio']:.2f} |")
    return "\n".join(out + ["", *targets, ""])


SPEED_FIGURE = "speed.png"


def plot_speed(rows: Sequence[dict[str, Any]], path: Any, title: str = "") -> Any:
    """The speed figure beside the table: dense ms / pruned ms against the closed share of gated weights, one
    line per layout (its colour) and batch size (solid: the largest), the FLOP ratio as the ideal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    random = [r for r in rows if r["level"].startswith("random")]
    if not random:
        return None
    sizes = sorted({r["batch_size"] for r in random}, reverse=True)
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for layout in dict.fromkeys(r["layout"] for r in random):
        for size, style in zip(sizes, ("-", "--", ":")):
            mine = sorted((r for r in random if r["layout"] == layout and r["batch_size"] == size),
                          key=lambda r: r["closed_share_of_gated"])
            if mine:
                ax.plot([100 * r["closed_share_of_gated"] for r in mine], [r["latency_ratio"] for r in mine],
                        marker="o", ls=style, color=LAYOUT_COLOURS.get(layout.removesuffix("+heads"), "#7f7f7f"),
                        label=f"{layout}, batch {size}")
    ideal = sorted((r for r in random if r["batch_size"] == sizes[0] and r["layout"] == random[0]["layout"]),
                   key=lambda r: r["closed_share_of_gated"])
    ax.plot([100 * r["closed_share_of_gated"] for r in ideal], [r["flop_ratio"] for r in ideal], color="#000000",
            lw=0.8, ls="-.", label="FLOP ratio (ideal)")
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.margins(x=0.08, y=0.08)
    ax.set_xlabel("% of gated weights closed")
    ax.set_ylabel("speed-up: dense ms / pruned ms")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path)
