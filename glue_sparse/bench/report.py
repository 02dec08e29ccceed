"""``glue-sparse report``: tables (markdown, CSV) and plots recomputed from a bench results store.

Every average comes from ``scoring.glue_average`` over the rows' flat metrics, so the report, the
lm-eval group and the evaluate metric agree. Seeds are summarised as mean ± std and median.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from glue_sparse.bench.cells import averaged_seeds
from glue_sparse.bench.frontier import FRONTIER_PLOT, TASKS_PLOT, level_verdicts, plot_frontier, plot_tasks
from glue_sparse.common.colours import method_colour
from glue_sparse.bench.report_targets import targets
from glue_sparse.common.targets import DEFAULT_BENCH_TARGETS, BenchTargets
from glue_sparse_tasks import scoring
from glue_sparse_tasks.atomic import write_text_atomic
from glue_sparse.common.figures import save_figure

REPORT_MD = "report.md"
REPORT_CSV = "report.csv"
SCORE_PLOT = "score_vs_removed.png"
LATENCY_PLOT = "latency_vs_removed.png"


@dataclass
class Summary:
    values: list[float]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values) if self.values else math.nan

    @property
    def std(self) -> float:
        return statistics.stdev(self.values) if len(self.values) > 1 else 0.0

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else math.nan

    def mean_text(self, scale: float = 1.0, digits: int = 1) -> str:
        """Just the mean: for per-row quantities (latency, memory) averaged over tasks and seeds."""
        return f"{self.mean * scale:.{digits}f}" if self.values else "–"

    def text(self, scale: float = 100.0, digits: int = 1) -> str:
        if not self.values:
            return "–"
        if len(self.values) == 1:
            return f"{self.mean * scale:.{digits}f}"
        return f"{self.mean * scale:.{digits}f} ± {self.std * scale:.{digits}f} ({self.median * scale:.{digits}f})"


def _primary_key(task: str, convention: str) -> str:
    entries = scoring.get_convention(convention).entries
    keys = entries.get(task) or (f"{task}_{scoring.primary_metric(task)}",)
    return keys[0]


def summarise(rows: Sequence[dict[str, Any]], convention: str = "default") -> list[dict[str, Any]]:
    """One summary per (method label, regime): per-task scores, GLUE averages, accounting, latency."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        groups[(row["label"], row["regime"])].append(row)
    tasks = sorted({r["task"] for r in rows})
    out = []
    for (label, regime), group in sorted(groups.items()):
        seed_tasks: dict[int, set[str]] = defaultdict(set)
        for r in group:
            seed_tasks[r["seed"]].add(r["task"])
        averaged, common = averaged_seeds(seed_tasks)
        by_seed: dict[int, dict[str, float]] = {seed: {} for seed in averaged}
        for r in group:
            if r["seed"] in by_seed and r["task"] in common:
                by_seed[r["seed"]].update(r["flat_metrics"])
        averages = {seed: scoring.glue_average(flat, convention) for seed, flat in by_seed.items()}
        cells: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
        for r in group:
            cells[r["seed"]][r["task"]] = {"flat": r["flat_metrics"], "peak_rss_mb": r["peak_rss_bytes"] / 2**20}
        per_task = {t: Summary([r["flat_metrics"][_primary_key(t, convention)] for r in group
                                if r["task"] == t and _primary_key(t, convention) in r["flat_metrics"]])
                    for t in tasks}
        any_avg = next(iter(averages.values()))
        complete = all(a.is_complete for a in averages.values())
        avg_values = [a.value if complete else a.partial_value for a in averages.values()]
        latencies = [r["latency"] for r in group if r.get("latency")]
        chance = {t: next((r["chance"] for r in group if r["task"] == t and "chance" in r), None) for t in tasks}
        pruned_ms = [l["pruned_ms_per_batch"] for l in latencies if "pruned_ms_per_batch" in l]
        out.append({
            "label": label, "method": group[0]["method"], "regime": regime,
            "seeds": averaged, "seeds_on_fewer_tasks": sorted(set(seed_tasks) - set(averaged)), "tasks": per_task,
            "chance_recorded": all(c is not None for c in chance.values()),
            "not_above_chance": sorted(t for t, c in chance.items() if c is not None and per_task[t].values
                                       and per_task[t].mean <= c),
            "target_removal": group[0]["hyperparameters"].get("target_removal"),
            "distill": bool(group[0]["hyperparameters"].get("distill")),
            "start_from": group[0]["hyperparameters"].get("start_from"),
            "removal_errors": [abs(r["accounting"]["removed_share_of_gated"] - r["hyperparameters"]["target_removal"])
                               for r in group if r["hyperparameters"].get("target_removal")],
            "devices": sorted({str(r.get("device") or "cpu") for r in group}),
            "glue_average": Summary([v for v in avg_values if v is not None]),
            "cells": dict(cells), "convention": convention,
            "average_label": any_avg.label(), "average_tasks": sorted(any_avg.entries),
            "average_complete": any_avg.is_complete,
            "trainable": statistics.median(r["accounting"]["trainable_parameters"] for r in group),
            "removed_gated": Summary([r["accounting"]["removed_share_of_gated"] for r in group]),
            # what the timed pruned model physically removed (its layout may keep closed weights as zeros)
            "physically_removed_gated": Summary([l["removed_share_of_gated"] for l in latencies
                                                 if "removed_share_of_gated" in l]),
            "removed_total": Summary([r["accounting"]["removed_share_of_total"] for r in group]),
            "dense_ms": Summary([l["dense_ms_per_batch"] for l in latencies]),
            "pruned_ms": Summary(pruned_ms),
            "latency_ratio": Summary([l["latency_ratio"] for l in latencies if "latency_ratio" in l]),
            "peak_rss_mb": Summary([r["peak_rss_bytes"] / 2**20 for r in group]),
            "seconds_per_step": Summary([r["seconds_per_step"] for r in group if r["seconds_per_step"]]),
            # a cell's own training (mask-search: its search); a distilled cell's teacher is the full arm's cell
            "train_minutes": Summary([r["train_seconds"] / 60 for r in group if r.get("train_seconds") is not None]),
            "pruned_max_diff": max((abs(r["pruned_metrics"].get(k, v) - v) for r in group if r["pruned_metrics"]
                                    for k, v in r["metrics"].items()), default=None),
        })
    return out


NOT_ABOVE_CHANCE_MARK = " (not above chance)"
PRUNED_METRIC_TOLERANCE = 1e-4  # float rounding of folded weights moves a correlation by ~1e-6


def _pruned_line(summaries: Sequence[dict[str, Any]]) -> str:
    """Whether pruned models score like their gated adapters, with the largest metric difference."""
    diffs = [s["pruned_max_diff"] for s in summaries if s["pruned_max_diff"] is not None]
    if not diffs:
        return "No pruned models in these results."
    worst = max(diffs)
    verdict = "yes, on every row" if worst <= PRUNED_METRIC_TOLERANCE else "NO: see results.jsonl"
    return (f"Pruned models score the same as their gated adapters (within {PRUNED_METRIC_TOLERANCE:g}): "
            f"{verdict}; largest metric difference {worst:.1e}.")


def _latency_provenance_line(rows: Sequence[dict[str, Any]]) -> str | None:
    """Which code timed the latency column. Latency depends on the pruning code and the host, not on
    training, so a store assembled over many commits (or rows timed before rows recorded the timing
    commit) says so instead of presenting its ratios as one measurement."""
    counts: Counter[str] = Counter()
    for row in rows:
        latency = row.get("latency")
        if latency:
            code = latency.get("git") or {}
            commit = (code.get("commit") or "")[:7]
            counts[(commit + (" (dirty)" if code.get("dirty") else "")) if commit else "an unrecorded commit"] += 1
    if not counts:
        return None
    ordered = sorted(counts.items(), key=lambda c: (-c[1], c[0]))  # most rows first, not hash order
    parts = [f"{code} ({n} row{'s' if n > 1 else ''})" for code, n in ordered]
    mixed = "; ratios timed by different code or hosts are not one measurement" if len(counts) > 1 else ""
    return f"Latency timed by code at {', '.join(parts)}{mixed}."


def _seeds_text(summary: dict[str, Any]) -> str:
    """The seeds the GLUE average is over, and those left out of it because they ran fewer tasks."""
    fewer = summary.get("seeds_on_fewer_tasks")
    return ",".join(map(str, summary["seeds"])) + (f" (+{','.join(map(str, fewer))} on fewer tasks)" if fewer else "")


def _table_rows(summaries: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    tasks = sorted({t for s in summaries for t in s["tasks"]})
    header = ["method", "regime", "seeds", *tasks, "GLUE avg", "avg over", "trainable", "closed % gated",
              "closed % total", "physically removed % gated", "dense ms/batch", "pruned ms/batch", "latency ×",
              "peak train MB", "s/step", "train min"]
    body = []
    for s in summaries:
        body.append([
            s["label"], s["regime"], _seeds_text(s),
            *[s["tasks"][t].text() + (NOT_ABOVE_CHANCE_MARK if t in s["not_above_chance"] else "") for t in tasks],
            s["glue_average"].text(), "+".join(s["average_tasks"]), f"{s['trainable']:,.0f}",
            s["removed_gated"].mean_text(100), s["removed_total"].mean_text(100),
            s["physically_removed_gated"].mean_text(100), s["dense_ms"].mean_text(),
            s["pruned_ms"].mean_text(), s["latency_ratio"].mean_text(1, 2), s["peak_rss_mb"].mean_text(1, 0),
            s["seconds_per_step"].mean_text(1, 2), s["train_minutes"].mean_text(1, 1),
        ])
    return header, body


def _plot(summaries: Sequence[dict[str, Any]], y: str, ylabel: str, path: Path) -> dict[str, str]:
    """One point per (method, removal) with the seed spread as error bars: the Pareto view. Returns the
    colour each drawn method got (one colour per method in every figure)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2), dpi=120)
    colours: dict[str, str] = {}
    for method in sorted({s["method"] for s in summaries}):
        for regime in sorted({s["regime"] for s in summaries}):
            group = [s for s in summaries if s["method"] == method and s["regime"] == regime
                     and (s["glue_average"].values if y == "score" else s["latency_ratio"].values)]
            if not group:
                continue
            values = [s["glue_average"] if y == "score" else s["latency_ratio"] for s in group]
            scale = 100 if y == "score" else 1
            xs = [s["removed_gated"].mean * 100 for s in group]
            ax.errorbar(xs, [v.mean * scale for v in values], yerr=[v.std * scale for v in values], fmt="o",
                        capsize=3, label=f"{method} ({regime})", color=method_colour(method),
                        markerfacecolor=method_colour(method) if regime == "limited" else "white")
            colours[method] = method_colour(method)
            for s, x_, v in zip(group, xs, values):
                ax.annotate(f"{s['label']} (n={len(s['seeds'])})", (x_, v.mean * scale), textcoords="offset points",
                            xytext=(4, 4), fontsize=7)
    if y == "latency":
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.margins(x=0.1, y=0.1)  # no point on the frame's edge
    ax.set_xlabel("% of gated weights removed")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)
    return colours


def _score_axis_label(summaries: Sequence[dict[str, Any]], convention: str) -> str:
    """The score plot's y-axis: the GLUE average, or the tasks a partial average covers (a one-task
    part of a grid plots that task's score, and the axis says so)."""
    if all(s["average_complete"] for s in summaries):
        return f"GLUE average ×100 ({convention})"
    tasks = sorted({t for s in summaries for t in s["average_tasks"]})
    return f"{tasks[0]} score ×100" if len(tasks) == 1 else f"average over {', '.join(tasks)} ×100 (partial)"


def write_report(rows: Sequence[dict[str, Any]], out_dir: str | Path, convention: str = "default",
                 title: str = "glue-sparse benchmark", preface: str = "",
                 goals: BenchTargets = DEFAULT_BENCH_TARGETS) -> dict[str, Path]:
    """Write report.md, report.csv and the two PNG plots; return their paths. ``goals``: the targets
    judged under the table (a bench config's, else targets.json's)."""
    if not rows:
        raise ValueError("the results store has no rows to report")
    out_dir = Path(out_dir)
    summaries = summarise(rows, convention)
    header, body = _table_rows(summaries)
    buf = io.StringIO()
    csv.writer(buf).writerows([header, *body])
    paths = {"csv": write_text_atomic(out_dir / REPORT_CSV, buf.getvalue())}
    label = summaries[0]["average_label"]
    md = [f"# {title}", "", preface, "" if preface else None,
          f"Scores ×100 on GLUE validation sets; mean ± std (median) over seeds; {label}. Trainable "
          "parameters (median), removal, latency, peak memory and s/step are means over tasks and seeds. "
          "Convention: " + scoring.get_convention(convention).description + ".", "",
          "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(row) + " |" for row in body]
    md += ["", "## Targets", *targets(summaries, goals), "",
           _pruned_line(summaries), _latency_provenance_line(rows),
           "", f"![score vs removed]({SCORE_PLOT})", f"![latency vs removed]({LATENCY_PLOT})", ""]
    out_dir.mkdir(parents=True, exist_ok=True)
    frontier = plot_frontier(summaries, out_dir / FRONTIER_PLOT)
    if frontier is not None:
        paths["frontier_plot"] = frontier
        paths["tasks_plot"] = plot_tasks(summaries, out_dir / TASKS_PLOT)
        md += ["## Frontier", "", "Per removal level, methods ranked by their average over the tasks every row of the "
               "plot shares (train minutes: a cell's own training or search, its teacher not counted):", "",
               *level_verdicts(summaries), "", f"![accuracy against speed-up and removal]({FRONTIER_PLOT})",
               f"![per task]({TASKS_PLOT})", ""]
    paths["markdown"] = write_text_atomic(out_dir / REPORT_MD, "\n".join(line for line in md if line is not None))
    _plot(summaries, "score", _score_axis_label(summaries, convention), out_dir / SCORE_PLOT)
    _plot(summaries, "latency", "CPU eval speed-up, dense ms / pruned ms", out_dir / LATENCY_PLOT)
    paths["score_plot"], paths["latency_plot"] = out_dir / SCORE_PLOT, out_dir / LATENCY_PLOT
    return paths
