"""``glue-sparse finetune``: train an encoder on GLUE tasks with one method, regime and seed list."""

from __future__ import annotations

import argparse

from glue_sparse.cli.flags import options_from
from glue_sparse.finetune.options import TrainingOptions

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


def run(args: argparse.Namespace) -> int:
    from glue_sparse.finetune.many import plan_finetunes, run_finetunes, summary_table  # torch

    options = options_from(args, TrainingOptions)
    options.report_to = [r for given in options.report_to or () for r in given.split(",") if r]
    plan = plan_finetunes(args.tasks, args.seeds, options, args.output, base_model=args.model,
                          data_dir=args.data_dir, use_hub=args.hub, overwrite=args.overwrite, resume=args.resume)
    records = run_finetunes(plan, data_dir=args.data_dir, use_hub=args.hub, overwrite=args.overwrite,
                            resume=args.resume, keep_checkpoints=args.keep_checkpoints)
    print("\n" + summary_table(records))
    return 0
