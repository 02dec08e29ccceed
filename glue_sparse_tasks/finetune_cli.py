"""``glue-sparse finetune``: train an encoder on GLUE tasks with one method, regime and seed list."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from glue_sparse_tasks.glue_tasks import GLUE8, GLUE_TASKS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", required=True, help="comma-separated GLUE tasks, or 'all' (the 8 GLUE-average "
                                                  "tasks that have training data; wnli only by name)")
    p.add_argument("--method", default="gates", help="full, lora, gates or gates+lora (default gates)")
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
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--eval-batch-size", type=int, default=64)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--warmup-ratio", type=float, default=0.06)
    p.add_argument("--grad-accum", type=int, default=1, dest="gradient_accumulation_steps")
    p.add_argument("--lora-r", type=int)
    p.add_argument("--lora-alpha", type=int)
    p.add_argument("--lora-dropout", type=float)
    p.add_argument("--target-sparsity", type=float)
    p.add_argument("--sparsity-lambda", type=float)
    p.add_argument("--reg-sigma", type=float, help="sigma of P(open) in the regulariser (default: noise std)")
    p.add_argument("--gate-lr", type=float, dest="gate_learning_rate", help="learning rate of the gate logits")
    p.add_argument("--select", dest="model_selection", default="last", choices=("last", "best"),
                   help="final model: last epoch (default) or best validation epoch (optimistic)")
    p.add_argument("--prune", action="store_true", help="also save the physically pruned model (gates)")
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
