"""``glue-sparse pretrain``: a Llama of one of GaLore's sizes pre-trained from scratch on C4, dense or
gated. Every flag is a field of ``PretrainOptions``."""

from __future__ import annotations

from glue_sparse.cli.flags import options_from
from glue_sparse.common.option_fields import SeedsOption, per_seed
from glue_sparse.pretrain.options import PretrainOptions

PARSER_DATACLASSES = (PretrainOptions, SeedsOption)


def run(args) -> int:
    from glue_sparse.pretrain.run import run_pretrain  # torch: only when the command runs

    records = [run_pretrain(options) for options in per_seed(options_from(args, PretrainOptions), args.seeds,
                                                              "out_dir")]
    return 0 if all(record.get("status") == "complete" for record in records) else 1
