"""``glue-sparse finetune``: train an encoder on GLUE tasks with one method, regime and seed list."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path

from glue_sparse.cli.options import options_from
from glue_sparse.experiments.finetune import identity, output_dir_state, run_finetune
from glue_sparse.experiments.finetune_config import FinetuneConfig, FinetuneConfigError, TrainingOptions
from glue_sparse_tasks.atomic import check_writable
from glue_sparse_tasks.data import load_glue_rows
from glue_sparse_tasks.glue_tasks import GLUE8, GLUE_TASKS
from glue_sparse_tasks.local_formats import GlueDataError

HELP = "fine-tune an encoder on GLUE tasks (full, lora, gates, gates+lora, magnitude)"

#: What ``glue-sparse finetune`` adds to the fine-tuning options (``TrainingOptions``, whose fields give
#: the other flags, their defaults and help): what to train on, where to write, how to resume.
PARSER_DATACLASSES = (TrainingOptions,)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", required=True, help="comma-separated GLUE tasks, or 'all' (the 8 GLUE-average "
                                                  "tasks that have training data; wnli only by name)")
    p.add_argument("--seeds", default="1", help="comma-separated seeds, run one after another (default 1)")
    p.add_argument("--model", help="encoder folder or Hub name (default: the packaged MiniLM)")
    p.add_argument("--output", required=True, help="output folder: <output>/<task>/ (one seed) or "
                                                   "<output>/seed-<s>/<task>/ (several)")
    p.add_argument("--data-dir", help="local GLUE folder (else $GLUE_SPARSE_DATA_DIR, then the Hub)")
    p.add_argument("--no-hub", dest="hub", action="store_false", help="never ask the Hugging Face Hub")
    p.add_argument("--overwrite", action="store_true", help="replace a different run in the output folder")
    p.add_argument("--resume", action="store_true", help="continue unfinished runs from their last checkpoint")
    p.add_argument("--keep-checkpoints", action="store_true", help="keep Trainer checkpoints after success")


def _available_tasks(names: list[str], data_dir: str | None, use_hub: bool) -> tuple[list[str], dict[str, str]]:

    found, skipped = [], {}
    for task in names:
        try:
            load_glue_rows(task, "train", data_dir, limit=1, use_hub=use_hub)
            found.append(task)
        except GlueDataError as exc:
            skipped[task] = str(exc).splitlines()[0]
    return found, skipped


def run(args: argparse.Namespace) -> int:

    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        print(f"error: --seeds takes comma-separated integers, got {args.seeds!r}", file=sys.stderr)
        return 2
    if args.tasks == "all":
        tasks, skipped = _available_tasks(list(GLUE8), args.data_dir, args.hub)
        for task, why in skipped.items():
            logging.getLogger("glue_sparse").info(f"skipping {task}: no training data ({why})")
    else:
        tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
        unknown = [t for t in tasks if t not in GLUE_TASKS]
        if unknown:
            print(f"error: unknown task(s) {unknown}; valid tasks are: {', '.join(GLUE_TASKS)}", file=sys.stderr)
            return 2
        _, no_train = _available_tasks(tasks, args.data_dir, args.hub)
        if no_train:  # before any folder is made or model loaded
            for task, why in no_train.items():
                print(f"error: {task} has no usable training data: {why}", file=sys.stderr)
            return 2
    check_writable(args.output, "--output")
    options = dataclasses.asdict(options_from(args, TrainingOptions))
    options["report_to"] = [r for given in options["report_to"] or () for r in given.split(",") if r]
    plan = []
    try:  # every configuration and output folder is checked before anything trains
        for seed in seeds:
            for task in tasks:
                config = FinetuneConfig(task=task, seed=seed, base_model=args.model, **options)
                out = Path(args.output) / f"seed-{seed}" if len(seeds) > 1 else Path(args.output)
                output_dir_state(out / task, identity(config), args.overwrite, args.resume)
                plan.append((config, out))
    except FinetuneConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not plan:
        print("error: no task to train", file=sys.stderr)
        return 2
    import torch
    from accelerate import PartialState

    # under torchrun: every rank has checked before any folder is made (cpu=True: gloo without CUDA,
    # as the Trainer's own TrainingArguments(use_cpu=...) will set it up)
    PartialState(cpu=not torch.cuda.is_available()).wait_for_everyone()
    rows = []
    for config, out in plan:
        logging.getLogger("glue_sparse").info(
            f"== {config.task} · {config.method} · {config.regime} · seed {config.seed} -> {out / config.task}")
        record = run_finetune(config, out, data_dir=args.data_dir, overwrite=args.overwrite, resume=args.resume,
                              keep_checkpoints=args.keep_checkpoints, use_hub=args.hub)
        rows.append(record)
    print(f"\n{'task':<6} {'seed':>4} {'metric':<9} {'score':>7} {'trainable':>10} {'removed':>8} "
          f"{'s/step':>7} {'peak MB':>8}")
    for r in rows:
        accounting = r["accounting"]
        print(f"{r['task']:<6} {r['seed']:>4} {r['primary_metric']:<9} {r['final_score']:>7.4f} "
              f"{accounting['trainable_parameters']:>10,} {accounting['removed_share_of_gated']:>8.1%} "
              f"{r['seconds_per_step'] or 0:>7.3f} {r['peak_rss_bytes'] / 2**20:>8.0f}")
    if any(r["selection_is_optimistic"] for r in rows):
        print("note: --select best reports the best validation epoch: an optimistic estimate")
    return 0
