"""The main job: a small but real comparison (full fine-tuning vs sparse gates vs magnitude pruning at
30% removal, SST-2 and STS-B, one seed) run through the bench, with a table a person can read."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from glue_sparse.experiments.bench import BenchConfig, read_store, run_bench
from glue_sparse.experiments.report import write_report
from glue_sparse_tasks.scoring import primary_metric

DEMO_TASKS = ("sst2", "stsb")
DEMO_TRAIN_ROWS = 2000
DEMO_EPOCHS = 2.0
DEMO_NOTE = ("Main job: full fine-tuning vs sparse gates vs magnitude pruning, both closing 30% of gated weights, "
             "packaged MiniLM, SST-2 and STS-B. It differs from the converged benchmark "
             "(benchmarks/minilm_converged.json: 5 tasks, 10,000 rows, 5 epochs, 3 seeds) only in size: "
             "first {rows} training rows, {epochs:g} epochs, one seed.")


def demo_config(data_dir: str | None, train_limit: int = DEMO_TRAIN_ROWS, epochs: float = DEMO_EPOCHS):
    """The main job's grid: full vs gates vs magnitude at 30% removal on two tasks, one seed."""

    return BenchConfig.from_dict({
        "tasks": list(DEMO_TASKS), "regimes": ["limited"], "seeds": [1],
        "methods": ["full", {"method": "gates", "label": "gates r0.3", "target_removal": 0.3},
                    {"method": "magnitude", "label": "magnitude r0.3", "target_removal": 0.3}],
        "finetune": {"train_limit": train_limit, "epochs": epochs},
        "latency_docs": 64, "latency_rounds": 3, "data_dir": data_dir, "use_hub": data_dir is None,
    }, "demo")


def demo_table(rows: list[dict]) -> str:
    """Method x task scores with the chance line, achieved removal and measured speed-up."""

    tasks = [t for t in DEMO_TASKS if any(r["task"] == t for r in rows)]
    labels = list(dict.fromkeys(r["label"] for r in rows))
    heads = [f"{t} {primary_metric(t)}" for t in tasks]
    lines = [f"{'method':<16}" + "".join(f"{h:>16}" for h in heads)
             + f"{'closed (gated)':>16}{'removed':>9}{'speed-up':>10}"]
    for label in labels:
        mine = {r["task"]: r for r in rows if r["label"] == label}
        cells = []
        for t in tasks:
            r = mine.get(t)
            score = r["flat_metrics"].get(f"{t}_{primary_metric(t)}") if r else None
            mark = "" if r is None or score is None or score > r.get("chance", -1) else " (chance)"
            cells.append(f"{'–' if score is None else f'{score:.3f}{mark}':>16}")
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


def run_demo(output: str | Path, data_dir: str | None = None, train_limit: int = DEMO_TRAIN_ROWS,
             epochs: float = DEMO_EPOCHS) -> dict:
    """Run (or resume) the main job's grid; print its table and say where the report and plots are."""
    log = logging.getLogger("glue_sparse").info
    data_dir = data_dir or os.environ.get("GLUE_SPARSE_DATA_DIR")
    if not data_dir and Path("../shared/data/glue").is_dir():
        data_dir = "../shared/data/glue"
    log(DEMO_NOTE.format(rows=train_limit, epochs=epochs))
    started = time.perf_counter()
    bench = demo_config(data_dir, train_limit, epochs)
    store = run_bench(bench, output, log=log)
    rows = read_store(store)
    paths = write_report(rows, Path(output) / "report", title="glue-sparse main job")
    print("\n" + demo_table(rows) + "\n")
    print(f"closed: share of the gated (attention and FFN) weights the method took out of the computation; "
          f"removed: the share physically gone from the timed pruned model (the rest stay as zeros where "
          f"removing them costs more index work than it saves); speed-up: dense / pruned CPU latency, batch "
          f"{bench.latency_batch_size}, {rows[0]['latency']['threads']} threads.")
    print(f"finished in {(time.perf_counter() - started) / 60:.1f} min\n"
          f"table:  {paths['markdown']}\nplots:  {paths['score_plot']}\n        {paths['latency_plot']}\n"
          f"rows:   {store}")
    return paths
