"""``glue-sparse finetune``: train an encoder on GLUE tasks with one method, regime and seed list."""

from __future__ import annotations

import argparse

from glue_sparse.cli.flags import options_from
from glue_sparse.finetune.options import FinetuneCommandOptions, TrainingOptions

#: The fine-tuning options (``TrainingOptions``: every default and help written once) and what the command
#: adds (``FinetuneCommandOptions``): what to train on, where to write, how to resume.
PARSER_DATACLASSES = (TrainingOptions, FinetuneCommandOptions)


def run(args: argparse.Namespace) -> int:
    from glue_sparse.finetune.many import plan_finetunes, run_finetunes, summary_table  # torch

    options = options_from(args, TrainingOptions)
    command = options_from(args, FinetuneCommandOptions)
    seeds = ",".join(map(str, command.seeds))
    plan = plan_finetunes(command.tasks, seeds, options, command.output, base_model=command.model,
                          data_dir=command.data_dir, use_hub=command.hub, overwrite=command.overwrite,
                          resume=command.resume)
    records = run_finetunes(plan, data_dir=command.data_dir, use_hub=command.hub, overwrite=command.overwrite,
                            resume=command.resume, keep_checkpoints=command.keep_checkpoints)
    print("\n" + summary_table(records))
    return 0
