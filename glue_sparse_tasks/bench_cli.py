"""``glue-sparse bench``, ``report`` and ``demo`` (the README's main job)."""

from __future__ import annotations

import argparse
import logging
import json
import sys
import time
from pathlib import Path

DEMO_TASKS = ("sst2", "stsb")
DEMO_TRAIN_ROWS = 2000
DEMO_EPOCHS = 2.0
DEMO_NOTE = ("Main job: full fine-tuning vs sparse gates vs magnitude pruning, both at 30% of gated weights removed, "
             "packaged MiniLM, SST-2 and STS-B. It differs from the committed benchmark "
             "(benchmarks/results/minilm_converged: 5 tasks, 10,000 rows, 5 epochs, 3 seeds) only in size: "
             "first {rows} training rows, {epochs:g} epochs, one seed.")


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="JSON or YAML bench config (flags below override its fields)")
    p.add_argument("--tasks", help="comma-separated GLUE tasks")
    p.add_argument("--methods", help="comma-separated methods: full, lora, gates, gates+lora")
    p.add_argument("--regimes", help="comma-separated: full, limited")
    p.add_argument("--seeds", help="comma-separated seeds")
    p.add_argument("--model", dest="base_model", help="encoder folder or Hub name (default: packaged MiniLM)")
    p.add_argument("--epochs", type=float)
    p.add_argument("--max-steps", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--eval-limit", type=int, help="validation docs per task for lm-eval (default: all)")
    p.add_argument("--latency-docs", type=int)
    p.add_argument("--data-dir")
    p.add_argument("--no-hub", dest="use_hub", action="store_false", default=None)
    p.add_argument("--convention", default="default", help="GLUE-average convention of the report")
    p.add_argument("--output", required=True, help="bench folder: results.jsonl, runs/, report/")
    p.add_argument("--executor", default="local", choices=("local", "ray"),
                   help="local: cells one after another here (default); ray: each cell a Ray task")
    p.add_argument("--address", help="Ray cluster address (default: start a local Ray for this run)")
    p.add_argument("--retries", type=int, default=2, help="Ray: retries of a failed or killed cell")
    p.add_argument("--cpus-per-cell", type=float, help="Ray: CPUs a cell asks for (default 1)")
    p.add_argument("--gpus-per-cell", type=float, help="Ray: GPUs a cell asks for (default 0)")


def _bench_config(args: argparse.Namespace):
    from glue_sparse_tasks.bench import GRID_OVERRIDES, BenchConfig

    raw: dict = {}
    if args.config:
        raw = BenchConfig.load(args.config).to_dict()
        raw["methods"] = [{"method": m["method"], "label": m["label"], **m["options"],
                           **{k: m[k] for k in GRID_OVERRIDES if m.get(k) is not None}} for m in raw["methods"]]
    for name, cast in (("tasks", str), ("methods", str), ("regimes", str), ("seeds", int)):
        value = getattr(args, name)
        if value:
            raw[name] = [cast(v) for v in value.split(",") if v]
    for name in ("base_model", "eval_limit", "latency_docs", "data_dir", "use_hub", "cpus_per_cell",
                 "gpus_per_cell"):
        if getattr(args, name) is not None:
            raw[name] = getattr(args, name)
    finetune = dict(raw.get("finetune") or {})
    for name in ("epochs", "max_steps", "batch_size"):
        if getattr(args, name) is not None:
            finetune[name] = getattr(args, name)
    raw["finetune"] = finetune
    return BenchConfig.from_dict(raw, args.config or "command line")


def run_bench_cmd(args: argparse.Namespace) -> int:
    from glue_sparse_tasks.bench import BenchConfigError, read_store, run_bench
    from glue_sparse_tasks.report import write_report

    try:
        bench = _bench_config(args)
    except BenchConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    (output / "bench_config.json").write_text(json.dumps(bench.to_dict(), indent=2, default=str) + "\n")
    store = run_bench(bench, output, log=logging.getLogger("glue_sparse").info, executor=args.executor,
                      address=args.address, retries=args.retries)
    paths = write_report(read_store(store), output / "report", args.convention)
    print(f"\nresults: {store}\nreport:  {paths['markdown']}\ncsv:     {paths['csv']}\n"
          f"plots:   {paths['score_plot']}, {paths['latency_plot']}")
    return 0


def add_report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", required=True, help="a bench results.jsonl")
    p.add_argument("--out", required=True, help="folder for report.md, report.csv and the plots")
    p.add_argument("--convention", default="default", help="default, leaderboard or bert_paper")
    p.add_argument("--title", default="glue-sparse benchmark")


def run_report_cmd(args: argparse.Namespace) -> int:
    from glue_sparse_tasks.bench import BenchConfigError, read_store
    from glue_sparse_tasks.report import write_report

    try:
        rows = read_store(args.results)
        paths = write_report(rows, args.out, args.convention, title=args.title)
    except (BenchConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(Path(paths["markdown"]).read_text())
    print(f"written: {', '.join(str(p) for p in paths.values())}")
    return 0


def add_demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output", default="demo_out", help="folder for the demo bench (default demo_out)")
    p.add_argument("--data-dir", help="GLUE folder (default: $GLUE_SPARSE_DATA_DIR or ../shared/data/glue)")
    p.add_argument("--train-limit", type=int, default=DEMO_TRAIN_ROWS,
                   help=f"training rows per task (default {DEMO_TRAIN_ROWS})")
    p.add_argument("--epochs", type=float, default=DEMO_EPOCHS, help=f"epochs (default {DEMO_EPOCHS:g})")


def demo_config(data_dir: str | None, train_limit: int = DEMO_TRAIN_ROWS, epochs: float = DEMO_EPOCHS):
    """The main job's grid: full vs gates vs magnitude at 30% removal on two tasks, one seed."""
    from glue_sparse_tasks.bench import BenchConfig

    return BenchConfig.from_dict({
        "tasks": list(DEMO_TASKS), "regimes": ["limited"], "seeds": [1],
        "methods": ["full", {"method": "gates", "label": "gates r0.3", "target_removal": 0.3},
                    {"method": "magnitude", "label": "magnitude r0.3", "target_removal": 0.3}],
        "finetune": {"train_limit": train_limit, "epochs": epochs},
        "latency_docs": 256, "latency_rounds": 5, "data_dir": data_dir, "use_hub": data_dir is None,
    }, "demo")


def demo_table(rows: list[dict]) -> str:
    """Method x task scores with the chance line, achieved removal and measured speed-up."""
    from glue_sparse_tasks.scoring import primary_metric

    tasks = [t for t in DEMO_TASKS if any(r["task"] == t for r in rows)]
    labels = list(dict.fromkeys(r["label"] for r in rows))
    heads = [f"{t} {primary_metric(t)}" for t in tasks]
    lines = [f"{'method':<16}" + "".join(f"{h:>16}" for h in heads) + f"{'removed (gated)':>17}{'speed-up':>10}"]
    for label in labels:
        mine = {r["task"]: r for r in rows if r["label"] == label}
        cells = []
        for t in tasks:
            r = mine.get(t)
            score = r["flat_metrics"].get(f"{t}_{primary_metric(t)}") if r else None
            mark = "" if r is None or score is None or score > r.get("chance", -1) else " (chance)"
            cells.append(f"{'–' if score is None else f'{score:.3f}{mark}':>16}")
        removed = [r["accounting"]["removed_share_of_gated"] for r in mine.values()]
        ratios = [r["latency"]["latency_ratio"] for r in mine.values() if (r.get("latency") or {}).get("latency_ratio")]
        lines.append(f"{label:<16}" + "".join(cells) + f"{sum(removed) / len(removed):>16.1%} "
                     + (f"{sum(ratios) / len(ratios):>9.2f}×" if ratios else f"{'–':>10}"))
    chance = {t: next(r["chance"] for r in rows if r["task"] == t) for t in tasks}
    lines.append(f"{'chance':<16}" + "".join(f"{chance[t]:>16.3f}" for t in tasks))
    return "\n".join(lines)


def run_demo_cmd(args: argparse.Namespace) -> int:
    import logging
    import os

    from glue_sparse_tasks.bench import read_store, run_bench
    from glue_sparse_tasks.report import write_report

    log = logging.getLogger("glue_sparse").info
    data_dir = args.data_dir or os.environ.get("GLUE_SPARSE_DATA_DIR")
    if not data_dir and Path("../shared/data/glue").is_dir():
        data_dir = "../shared/data/glue"
    log(DEMO_NOTE.format(rows=args.train_limit, epochs=args.epochs))
    started = time.perf_counter()
    bench = demo_config(data_dir, args.train_limit, args.epochs)
    store = run_bench(bench, args.output, log=log)
    rows = read_store(store)
    paths = write_report(rows, Path(args.output) / "report", title="glue-sparse main job")
    print("\n" + demo_table(rows) + "\n")
    print(f"removed: share of the gated (attention and FFN) weights physically removed; speed-up: dense / "
          f"pruned CPU latency, batch {bench.latency_batch_size}, {rows[0]['latency']['threads']} threads.")
    print(f"finished in {(time.perf_counter() - started) / 60:.1f} min\n"
          f"table:  {paths['markdown']}\nplots:  {paths['score_plot']}\n        {paths['latency_plot']}\n"
          f"rows:   {store}")
    return 0
