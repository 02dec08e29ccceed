"""``glue-sparse bench``: the fine-tune x evaluate x time grid, from a config file and flags."""

from __future__ import annotations

import argparse
import sys

from glue_sparse.bench.options import GRID_OVERRIDES, BenchCommandOptions, BenchConfig, BenchConfigError
from glue_sparse.cli.flags import options_from


#: every flag is a field of ``BenchCommandOptions``
PARSER_DATACLASSES = (BenchCommandOptions,)


def _bench_config(args: argparse.Namespace) -> BenchConfig:
    """The bench config: the file's fields, each given flag over it."""
    flags = options_from(args, BenchCommandOptions)
    raw: dict = {}
    given: list[str] = []  # fields given as flags: their errors name the flag
    if flags.config:
        raw = BenchConfig.load(flags.config).to_dict()
        raw["methods"] = [{"method": m["method"], "label": m["label"], **m["options"],
                           **{k: m[k] for k in GRID_OVERRIDES if m.get(k) is not None}} for m in raw["methods"]]
    for name in ("tasks", "methods", "regimes", "seeds", "only_tasks", "only_seeds", "only_regimes", "only_arms",
                 "eval_limit", "latency_docs", "data_dir", "cpus_per_cell", "gpus_per_cell"):
        if getattr(flags, name):
            raw[name] = getattr(flags, name)
            given.append(name)
    if flags.model is not None:
        raw["base_model"] = flags.model
    if flags.hub is not None:
        raw["use_hub"] = flags.hub
    finetune = dict(raw.get("finetune") or {})
    for name in ("epochs", "max_steps", "batch_size"):
        if getattr(flags, name) is not None:
            finetune[name] = getattr(flags, name)
    raw["finetune"] = finetune
    return BenchConfig.from_dict(raw, flags.config or "command line", given)


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
