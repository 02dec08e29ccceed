"""``glue-sparse bench``: the fine-tune x evaluate x time grid, from a config file and flags."""

from __future__ import annotations

import argparse
import sys

from glue_sparse.bench.options import GRID_OVERRIDES, BenchConfig, BenchConfigError
from glue_sparse.finetune.options import METHODS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="JSON or YAML bench config (flags below override its fields)")
    p.add_argument("--tasks", help="comma-separated GLUE tasks")
    p.add_argument("--methods", help=f"comma-separated methods: {', '.join(METHODS)}")
    p.add_argument("--regimes", help="comma-separated: full, limited")
    p.add_argument("--seeds", help="comma-separated seeds")
    p.add_argument("--only-tasks", help="run only this part of the grid: comma-separated tasks (its rows are the "
                   "whole grid's; for a grid longer than one working stretch)")
    p.add_argument("--only-seeds", help="run only this part of the grid: comma-separated seeds")
    p.add_argument("--only-regimes", help="run only this part of the grid: comma-separated regimes (full, limited)")
    p.add_argument("--only-arms", help="run only this part of the grid: comma-separated method labels "
                   "(e.g. 'full,gates-r0.3'; a label's blanks may be dashes)")
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
    p.add_argument("--retime-latency", action="store_true",
                   help="re-time the latency of the part's finished rows that other code (another commit or a "
                   "dirty tree) timed; trains nothing again (run with nothing else on the machine)")


def _bench_config(args: argparse.Namespace) -> BenchConfig:
    raw: dict = {}
    if args.config:
        raw = BenchConfig.load(args.config).to_dict()
        raw["methods"] = [{"method": m["method"], "label": m["label"], **m["options"],
                           **{k: m[k] for k in GRID_OVERRIDES if m.get(k) is not None}} for m in raw["methods"]]
    for name, cast in (("tasks", str), ("methods", str), ("regimes", str), ("seeds", int), ("only_tasks", str),
                       ("only_seeds", int), ("only_regimes", str), ("only_arms", str)):
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


def run(args: argparse.Namespace) -> int:
    from glue_sparse.bench.run import bench_and_report, summary  # torch and lm-eval: only when the command runs

    try:
        bench = _bench_config(args)
    except BenchConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    store, paths = bench_and_report(bench, args.output, args.convention, executor=args.executor, address=args.address,
                                    retries=args.retries, retime_latency=args.retime_latency)
    print(summary(store, paths))
    return 0
