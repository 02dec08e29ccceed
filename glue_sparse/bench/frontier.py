"""The accuracy–speed frontier of a bench report: each method as a line through its removal levels, against
measured latency speed-up and against the removed share, with the seeds' spread; per-task small multiples;
and, per level, which method leads, by how much, inside or outside the seeds' spread, at what training cost.

A *method line* is an arm's label without its level token (``gates+full r0.5 from-full distill`` ->
``gates+full from-full distill``), so the arms of one method at 30, 50 and 70% removed join up. Only
summaries of one regime that average the same tasks share an axis (a one-task full-data point never sits
on a five-task plot, nor a full-data point among limited-data ones). Every figure colours a method the same
way (``method_colour``).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from glue_sparse.bench.report_targets import coverage_rank, paired
from glue_sparse.common.colours import method_colour
from glue_sparse.common.figures import save_figure

FRONTIER_PLOT = "frontier.png"
TASKS_PLOT = "frontier_tasks.png"
#: where a gated arm started: its line style and marker
START_STYLES = {None: ("-", "o"), "pretrained": ("-", "o"), "full": ("--", "s"), "mask-search": (":", "^")}
_LEVEL = re.compile(r"\s*\br(\d+(?:\.\d+)?)\b")


def line_name(summary: dict[str, Any]) -> str:
    """The method line an arm belongs to: its label without the removal level."""
    return _LEVEL.sub("", summary["label"]).strip() or summary["label"]


def shared_axis(summaries: Sequence[dict[str, Any]]) -> tuple[str | None, list[str]]:
    """The regime and task set the frontier is drawn on: those of the full arm that averages the most tasks
    and shares them with the most arms (else the most common pair). One regime only: a full-data point and its
    full fine-tuning reference never sit among limited-data points."""
    def axis(s: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
        return s["regime"], tuple(s["average_tasks"])

    scored = [axis(s) for s in summaries if s["glue_average"].values]
    full = [axis(s) for s in summaries if s["method"] == "full" and s["glue_average"].values]
    chosen = max(set(full or scored), key=lambda a: (len(a[1]), scored.count(a), a[0] == "limited"), default=None)
    return (chosen[0], list(chosen[1])) if chosen else (None, [])


def frontier_lines(summaries: Sequence[dict[str, Any]]) -> tuple[list[str], dict[str, list[dict[str, Any]]], Any]:
    """(the shared tasks, {method line: its pruned summaries by removal}, the full arm's summary or None), all of
    the shared regime."""
    regime, tasks = shared_axis(summaries)
    on_axis = [s for s in summaries
               if s["regime"] == regime and list(s["average_tasks"]) == tasks and s["glue_average"].values]
    lines: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in on_axis:
        if s["target_removal"]:
            lines[line_name(s)].append(s)
    full = next((s for s in on_axis if s["method"] == "full"), None)
    return tasks, {k: sorted(v, key=lambda s: s["target_removal"]) for k, v in sorted(lines.items())}, full


def _style(summary: dict[str, Any]) -> dict[str, Any]:
    linestyle, marker = START_STYLES.get(summary.get("start_from"), ("-", "o"))
    return {"color": method_colour(summary["method"]), "linestyle": linestyle, "marker": marker,
            "markerfacecolor": method_colour(summary["method"]) if summary["distill"] else "white"}


def _reference(ax: Any, full: dict[str, Any] | None, scale: float = 100.0) -> None:
    """Full fine-tuning as a horizontal line, its seeds' spread as a band."""
    if full is None:
        return
    mean, std = full["glue_average"].mean * scale, full["glue_average"].std * scale
    ax.axhline(mean, color=method_colour("full"), lw=1.0, ls="-", label=f"full fine-tuning (n={len(full['seeds'])})")
    if std:
        ax.axhspan(mean - std, mean + std, color=method_colour("full"), alpha=0.08, lw=0)


def _score_limits(ax: Any, full: dict[str, Any] | None) -> None:
    """Room above and below every point and the full reference band, so nothing sits on the frame."""
    low, high = ax.get_ylim()
    if full is not None:
        mean, std = full["glue_average"].mean * 100, full["glue_average"].std * 100
        low, high = min(low, mean - std), max(high, mean + std)
    pad = 0.06 * (high - low or 1.0)
    ax.set_ylim(low - pad, high + pad)


def plot_frontier(summaries: Sequence[dict[str, Any]], path: Path) -> Path | None:
    """The figure: score against measured speed-up (left) and against removed share (right), written to
    ``path``; None when no pruned arm averages the shared tasks."""
    fig = frontier_figure(summaries)
    if fig is None:
        return None
    save_figure(fig, path, bbox_inches="tight")
    return path


def frontier_figure(summaries: Sequence[dict[str, Any]]) -> Any:
    """The frontier's matplotlib figure (None without pruned arms on the shared tasks)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks, lines, full = frontier_lines(summaries)
    if not lines:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), dpi=120, sharey=True)
    for ax, x_of, xlabel in ((axes[0], lambda s: s["latency_ratio"], "CPU eval speed-up (dense ms / pruned ms, batch 32)"),
                             (axes[1], lambda s: s["removed_gated"], "% of gated weights removed")):
        scale_x = 1.0 if ax is axes[0] else 100.0
        for name, group in lines.items():
            points = [s for s in group if x_of(s).values]
            if not points:
                continue
            ax.errorbar([x_of(s).mean * scale_x for s in points], [s["glue_average"].mean * 100 for s in points],
                        yerr=[s["glue_average"].std * 100 for s in points], capsize=3, lw=1.2, ms=6,
                        label=f"{name} (n={max(len(s['seeds']) for s in points)})", **_style(points[0]))
        _reference(ax, full)
        ax.margins(x=0.08, y=0.08)  # no point on the frame's edge
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    _score_limits(axes[0], full)
    axes[0].set_ylabel(f"{len(tasks)}-task average ×100 ({', '.join(tasks)})")
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    fig.suptitle("One line per method through its removal levels; bars: std over seeds. Filled: distilled; dashed "
                 "squares: started from the full fine-tune; dotted triangles: from mask search's mask", fontsize=9)
    fig.tight_layout()
    return fig


def plot_tasks(summaries: Sequence[dict[str, Any]], path: Path) -> Path | None:
    """Small multiples: each task's score against the removed share, the same lines and colours."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks, lines, full = frontier_lines(summaries)
    if not lines or not tasks:
        return None
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.2 * len(tasks), 3.4), dpi=110, squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for name, group in lines.items():
            points = [s for s in group if s["tasks"].get(task) and s["tasks"][task].values]
            if points:
                ax.errorbar([s["removed_gated"].mean * 100 for s in points],
                            [s["tasks"][task].mean * 100 for s in points],
                            yerr=[s["tasks"][task].std * 100 for s in points], capsize=2, lw=1, ms=4, label=name,
                            **_style(points[0]))
        if full is not None and full["tasks"].get(task) and full["tasks"][task].values:
            ax.axhline(full["tasks"][task].mean * 100, color=method_colour("full"), lw=1.0, label="full fine-tuning")
        ax.margins(x=0.1, y=0.1)
        ax.set_title(task, fontsize=9)
        ax.set_xlabel("% gated removed", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4, fontsize=7, frameon=False)
    fig.tight_layout()
    save_figure(fig, path, bbox_inches="tight")
    return path


def level_verdicts(summaries: Sequence[dict[str, Any]]) -> list[str]:
    """Per removal level, in words: the best method line, its margin over the next with the seeds' spread
    (and whether the margin lies inside it), and each one's training minutes per cell. Methods run on the most
    seeds lead (``coverage_rank``, as the report's targets pick the best gated arm), so a one-seed draw never
    outranks a three-seed mean; one that reads higher on fewer seeds is named as such, and the next is the
    closest below the best on any seeds."""
    tasks, lines, full = frontier_lines(summaries)
    by_level: dict[float, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for name, group in lines.items():
        for s in group:
            by_level[round(s["target_removal"], 3)].append((name, s))
    out = []
    for level, arms in sorted(by_level.items()):
        ranked = sorted(arms, key=lambda a: (coverage_rank(a[1], tasks), a[1]["glue_average"].mean), reverse=True)
        (best, top), rest = ranked[0], ranked[1:]
        text = (f"- **{level:.0%} removed** ({len(ranked)} methods on {'+'.join(tasks)}): best **{best}** "
                f"{_score(top)}, {_minutes(top)}")
        text += _from_full(top, full, tasks)
        below = [(n, s) for n, s in rest if s["glue_average"].mean <= top["glue_average"].mean]
        if below:
            name, second = max(below, key=lambda a: a[1]["glue_average"].mean)  # the closest below, on any seeds
            margin = 100 * (top["glue_average"].mean - second["glue_average"].mean)
            spread = 100 * max(top["glue_average"].std, second["glue_average"].std)
            single = [n for n, s in ((best, top), (name, second)) if len(s["seeds"]) < 2]
            judged = ("one seed each, so no spread to judge it by" if len(single) == 2 else
                      f"{single[0]} has one seed, so no spread to judge it by" if single else
                      f"inside the seeds' spread (std up to {spread:.2f})" if margin <= spread else
                      f"outside the seeds' spread (std up to {spread:.2f})")
            text += f"; ahead of **{name}** {_score(second)}, {_minutes(second)}, by {margin:.2f}: {judged}"
        higher = [(n, s) for n, s in rest if s["glue_average"].mean > top["glue_average"].mean]
        if higher:
            name, s = max(higher, key=lambda a: a[1]["glue_average"].mean)
            text += (f"; **{name}** reads higher, {_score(s)}, on fewer seeds than {len(top['seeds'])}, "
                     "so it is not ranked against it")
        out.append(text + ".")
    return out


def _from_full(top: dict[str, Any], full: dict[str, Any] | None, tasks: list[str]) -> str:
    """The best method's distance from full fine-tuning on the cells both ran (``paired``, as the report's
    targets measure it), so a one-seed method is set against full's same seed, not its three-seed mean."""
    both = paired(top, full) if full is not None else None
    if both is None:
        return ""
    text = f"; {100 * (both.average - both.other_average):+.2f} from full fine-tuning"
    if both.seeds == top["seeds"] == full["seeds"] and both.tasks == tasks:
        return text
    where = f"seed{'s' if len(both.seeds) > 1 else ''} {','.join(map(str, both.seeds))}"
    if both.tasks != tasks:
        where += f", {'+'.join(both.tasks)}"
    return text + f" (on {where}, which both ran)"


def _score(s: dict[str, Any]) -> str:
    avg = s["glue_average"]
    return f"{avg.mean * 100:.1f}" + (f" ± {avg.std * 100:.1f} over {len(s['seeds'])} seeds" if len(s["seeds"]) > 1
                                      else " (1 seed)")


def _minutes(s: dict[str, Any]) -> str:
    minutes = s["train_minutes"].mean
    return "train min n/a" if math.isnan(minutes) else f"{minutes:.1f} train min/cell"
