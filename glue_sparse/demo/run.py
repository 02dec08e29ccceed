"""The main job: a small but real comparison (full fine-tuning vs sparse gates vs magnitude pruning at
30% removal, one seed; ``options.py`` says why SST-2 at 2,000 rows) run through the bench, with a
table a person can read and, under it, the converged benchmark's numbers for the same methods."""

from __future__ import annotations

import csv
import logging
import os
import time
from pathlib import Path

from glue_sparse.bench.options import arm_folder
from glue_sparse.bench.report import write_report
from glue_sparse.bench.grid import run_bench
from glue_sparse.bench.store import read_store
from glue_sparse.demo.options import CONVERGED_REPORT, DEMO_METHODS, DemoOptions
from glue_sparse_tasks.scoring import primary_metric

#: the checkout this module sits in (the converged report is a committed result, not package data)
CHECKOUT = Path(__file__).resolve().parents[2]


def _score(row: dict | None, task: str) -> float | None:
    return None if row is None else row["flat_metrics"].get(f"{task}_{primary_metric(task)}")


def demo_table(rows: list[dict]) -> str:
    """Method x task scores with their average, the chance line, achieved removal and measured speed-up."""
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    labels = list(dict.fromkeys(r["label"] for r in rows))
    heads = [f"{t} {primary_metric(t)}" for t in tasks] + [f"average ({len(tasks)})"]
    lines = [f"{'method':<16}" + "".join(f"{h:>16}" for h in heads)
             + f"{'closed (gated)':>16}{'removed':>9}{'speed-up':>10}"]
    for label in labels:
        mine = {r["task"]: r for r in rows if r["label"] == label}
        cells, scores = [], []
        for t in tasks:
            r, score = mine.get(t), _score(mine.get(t), t)
            scores.append(score)
            mark = "" if r is None or score is None or score > r.get("chance", -1) else " (chance)"
            cells.append(f"{'–' if score is None else f'{score:.3f}{mark}':>16}")
        mean = sum(scores) / len(scores) if None not in scores else None
        cells.append(f"{'–' if mean is None else f'{mean:.3f}':>16}")
        closed = [r["accounting"]["removed_share_of_gated"] for r in mine.values()]  # adapter: closed = removable
        timed = [r["latency"] for r in mine.values() if (r.get("latency") or {}).get("latency_ratio")]
        removed = [t["removed_share_of_gated"] for t in timed if "removed_share_of_gated" in t]
        ratios = [t["latency_ratio"] for t in timed]
        lines.append(f"{label:<16}" + "".join(cells) + f"{sum(closed) / len(closed):>15.1%} "
                     + (f"{sum(removed) / len(removed):>8.1%} " if removed else f"{'–':>9}")
                     + (f"{sum(ratios) / len(ratios):>9.2f}×" if ratios else f"{'–':>10}"))
    chance = {t: next(r["chance"] for r in rows if r["task"] == t) for t in tasks}
    lines.append(f"{'chance':<16}" + "".join(f"{chance[t]:>16.3f}" for t in tasks))
    return "\n".join(lines)


def converged_headline(tasks: list[str], report: Path = CHECKOUT / CONVERGED_REPORT) -> str:
    """One line: the committed converged benchmark's 5-task average (and the main job's tasks) for the
    main job's methods, read from its report.csv, so the user sees the ranking a full budget gives."""
    if not report.is_file():
        return f"converged benchmark: {CONVERGED_REPORT} is not in this install (see the source checkout)"
    labels = [m if isinstance(m, str) else m["label"] for m in DEMO_METHODS]
    with report.open(newline="") as f:
        found = {arm_folder(r["method"]): r for r in csv.DictReader(f)  # labels written before with blanks
                 if r["regime"] == "limited" and arm_folder(r["method"]) in labels}
    first = lambda text: text.split(" ")[0]  # noqa: E731  "67.2 ± 0.2 (67.3)": the mean
    parts = [f"{name} " + ", ".join(f"{label} {first(found[label][column])}" for label in labels if label in found)
             for name, column in [("5-task average", "GLUE avg"), *((t.upper(), t) for t in tasks)]]
    seeds = found[labels[0]]["seeds"] if labels[0] in found else "?"
    return (f"converged benchmark, packaged MiniLM ({CONVERGED_REPORT}; 10,000 rows, 5 epochs, seeds {seeds}, ×100): "
            + "; ".join(parts))


def run_demo(options: DemoOptions) -> dict:
    """Run (or resume) the main job's grid; print its table, the converged headline and where the report
    and plots are."""
    log = logging.getLogger("glue_sparse").info
    data_dir = options.data_dir or os.environ.get("GLUE_SPARSE_DATA_DIR")
    if not data_dir and Path("../shared/data/glue").is_dir():
        data_dir = "../shared/data/glue"
    bench = options.bench_config(data_dir)
    log(options.note())
    started = time.perf_counter()
    store = run_bench(bench, options.output, log=log)
    rows = read_store(store)
    paths = write_report(rows, Path(options.output) / "report", title="glue-sparse main job")
    print("\n" + demo_table(rows) + "\n" + converged_headline(list(bench.tasks)) + "\n")
    print(f"closed: share of the gated (attention and FFN) weights the method took out of the computation; "
          f"removed: the share physically gone from the timed pruned model (the rest stay as zeros where "
          f"removing them costs more index work than it saves); speed-up: dense / pruned CPU latency, batch "
          f"{bench.latency_batch_size}, {rows[0]['latency']['threads']} threads.")
    print(f"finished in {(time.perf_counter() - started) / 60:.1f} min\n"
          f"table:  {paths['markdown']}\nplots:  {paths['score_plot']}\n        {paths['latency_plot']}\n"
          f"rows:   {store}")
    return paths
