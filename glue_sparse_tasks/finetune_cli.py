"""``glue-sparse finetune``: train an encoder on GLUE tasks with one method, regime and seed list."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from glue_sparse_tasks.atomic import check_writable
from glue_sparse_tasks.glue_tasks import GLUE8, GLUE_TASKS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", required=True, help="comma-separated GLUE tasks, or 'all' (the 8 GLUE-average "
                                                  "tasks that have training data; wnli only by name)")
    p.add_argument("--method", default="gates", help="full, lora, gates, gates+lora or magnitude (default gates)")
    p.add_argument("--regime", default="limited", help="full or limited (first N train rows; default)")
    p.add_argument("--train-limit", type=int, help="N for the limited regime (default 10000)")
    p.add_argument("--seeds", default="1", help="comma-separated seeds, run one after another")
    p.add_argument("--model", help="encoder folder or Hub name (default: the packaged MiniLM)")
    p.add_argument("--output", required=True, help="output folder: <output>/<task>/ (one seed) or "
                                                   "<output>/seed-<s>/<task>/ (several)")
    p.add_argument("--data-dir", help="local GLUE folder (else $GLUE_SPARSE_DATA_DIR, then the Hub)")
    p.add_argument("--no-hub", dest="hub", action="store_false", help="never ask the Hugging Face Hub")
    p.add_argument("--epochs", type=float, default=3.0)
    p.add_argument("--max-steps", type=int, help="stop after this many optimiser steps (overrides epochs)")
    p.add_argument("--lr", type=float, dest="learning_rate", help="learning rate (default: per method)")
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--batch-size", type=int, help="default 32 (16 for --recipe reference)")
    p.add_argument("--eval-batch-size", type=int, default=64)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--warmup-ratio", type=float, help="default 0.06 (0 for --recipe reference)")
    p.add_argument("--lr-scheduler", help="Trainer schedule name; default linear (constant for --recipe reference)")
    p.add_argument("--max-grad-norm", type=float, help="gradient clipping; default 1.0 (0 = none, --recipe reference)")
    p.add_argument("--grad-accum", type=int, default=1, dest="gradient_accumulation_steps")
    p.add_argument("--lora-r", type=int)
    p.add_argument("--lora-alpha", type=int)
    p.add_argument("--lora-dropout", type=float)
    p.add_argument("--recipe", help="gate methods: 'removal' (default; removes --target-removal exactly) or "
                                    "'reference' (the FineGates GLUE recipe, steered by --target-sparsity)")
    p.add_argument("--target-removal", type=float, help="share of gated weights to remove, in (0, 1) "
                                                        "(gates, gates+lora, magnitude; default 0.3)")
    p.add_argument("--target-sparsity", type=float, help="reference recipe: share of rows and columns whose "
                                                         "P(open) is pulled down (default 0.4); not the removed share")
    p.add_argument("--sparsity-lambda", type=float, help="weight of the sparsity regulariser (default 50)")
    p.add_argument("--reg-sigma", type=float, help="sigma of P(open) in the regulariser (default 0.5, as the "
                                                   "reference code)")
    p.add_argument("--gate-lr", type=float, dest="gate_learning_rate",
                   help="learning rate of the gate logits (default: 1.0 / removal steps for the removal recipe, "
                        "the learning rate for the reference recipe)")
    p.add_argument("--removal-score", help="removal recipe: rank gates for closing by 'taylor' (default; "
                                           "accumulated |dL/dz * z|) or 'logit'")
    p.add_argument("--from", dest="from_run", help="magnitude: a finished full run folder to prune (default: "
                                                   "train a full run first, under <output>/magnitude-source/)")
    p.add_argument("--select", dest="model_selection", default="last", choices=("last", "best"),
                   help="final model: last epoch (default) or best validation epoch (optimistic)")
    p.add_argument("--prune", action="store_true", help="also save the physically pruned model (gates, magnitude)")
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    p.add_argument("--save-steps", type=int, help="checkpoint every N steps (default: every epoch)")
    p.add_argument("--report-to", default="", help="comma-separated Trainer loggers (tensorboard, wandb)")
    p.add_argument("--overwrite", action="store_true", help="replace a different run in the output folder")
    p.add_argument("--resume", action="store_true", help="continue unfinished runs from their last checkpoint")
    p.add_argument("--keep-checkpoints", action="store_true", help="keep Trainer checkpoints after success")


def _available_tasks(names: list[str], data_dir: str | None, use_hub: bool) -> tuple[list[str], dict[str, str]]:
    from glue_sparse_tasks.data import load_glue_rows
    from glue_sparse_tasks.local_formats import GlueDataError

    found, skipped = [], {}
    for task in names:
        try:
            load_glue_rows(task, "train", data_dir, limit=1, use_hub=use_hub)
            found.append(task)
        except GlueDataError as exc:
            skipped[task] = str(exc).splitlines()[0]
    return found, skipped


def run(args: argparse.Namespace) -> int:
    from sparse_models.finetune import identity, output_dir_state, run_finetune
    from sparse_models.finetune_config import FinetuneConfig, FinetuneConfigError

    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        print(f"error: --seeds takes comma-separated integers, got {args.seeds!r}", file=sys.stderr)
        return 2
    if args.tasks == "all":
        tasks, skipped = _available_tasks(list(GLUE8), args.data_dir, args.hub)
        for task, why in skipped.items():
            print(f"skipping {task}: no training data ({why})")
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
    fields = set(FinetuneConfig.field_names()) - {"task", "seed", "base_model", "report_to"}
    options = {k: v for k, v in vars(args).items() if k in fields}
    plan = []
    try:  # every configuration and output folder is checked before anything trains
        for seed in seeds:
            for task in tasks:
                config = FinetuneConfig(task=task, seed=seed, base_model=args.model,
                                        report_to=[r for r in args.report_to.split(",") if r], **options)
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
        print(f"== {config.task} · {config.method} · {config.regime} · seed {config.seed} -> {out / config.task}",
              flush=True)
        record = run_finetune(config, out, data_dir=args.data_dir, overwrite=args.overwrite, resume=args.resume,
                              keep_checkpoints=args.keep_checkpoints, use_hub=args.hub)
        rows.append(record)
    print(f"\n{'task':<6} {'seed':>4} {'metric':<9} {'score':>7} {'trainable':>10} {'removed':>8} "
          f"{'s/step':>7} {'peak MB':>8}")
    for r in rows:
        acc = r["accounting"]
        print(f"{r['task']:<6} {r['seed']:>4} {r['primary_metric']:<9} {r['final_score']:>7.4f} "
              f"{acc['trainable_parameters']:>10,} {acc['removed_share_of_gated']:>8.1%} "
              f"{r['seconds_per_step'] or 0:>7.3f} {r['peak_rss_bytes'] / 2**20:>8.0f}")
    if any(r["selection_is_optimistic"] for r in rows):
        print("note: --select best reports the best validation epoch: an optimistic estimate")
    return 0
