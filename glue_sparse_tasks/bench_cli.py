"""``glue-sparse bench``, ``report`` and ``demo`` (the README's main job)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

DEMO_TASKS = ("rte", "stsb", "sst2")
DEMO_NOTE = ("SMOKE-SIZED RUN: {steps} optimiser steps per task on the packaged MiniLM, one seed, "
             "limited regime. It shows the whole pipeline (fine-tune, lm-eval through sparse-gated, "
             "pruning, latency, report); it is not the published protocol and its scores are not results.")


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
    store = run_bench(bench, output, log=lambda m: print(m, flush=True), executor=args.executor,
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
    p.add_argument("--max-steps", type=int, default=40, help="optimiser steps per fine-tune (default 40)")


def run_demo_cmd(args: argparse.Namespace) -> int:
    import os

    from glue_sparse_tasks.bench import BenchConfig, read_store, run_bench
    from glue_sparse_tasks.report import write_report

    data_dir = args.data_dir or os.environ.get("GLUE_SPARSE_DATA_DIR")
    if not data_dir and Path("../shared/data/glue").is_dir():
        data_dir = "../shared/data/glue"
    note = DEMO_NOTE.format(steps=args.max_steps)
    print(note + "\n", flush=True)
    started = time.perf_counter()
    bench = BenchConfig.from_dict({
        "tasks": list(DEMO_TASKS), "methods": ["full", "gates"], "regimes": ["limited"], "seeds": [1],
        "finetune": {"max_steps": args.max_steps, "save_steps": args.max_steps, "logging_steps": 10},
        "latency_docs": 128, "latency_rounds": 3, "data_dir": data_dir, "use_hub": data_dir is None,
    }, "demo")
    store = run_bench(bench, args.output, log=lambda m: print(m, flush=True))
    paths = write_report(read_store(store), Path(args.output) / "report", title="glue-sparse demo (smoke-sized)",
                         preface=note)
    print("\n" + Path(paths["markdown"]).read_text())
    print(f"plots: {paths['score_plot']}\n       {paths['latency_plot']}")
    print(f"demo finished in {(time.perf_counter() - started) / 60:.1f} min. {note}")
    return 0
