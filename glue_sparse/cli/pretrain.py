"""``glue-sparse pretrain``: a Llama of one of GaLore's sizes pre-trained from scratch on C4, dense or
gated. Every flag is a field of ``PretrainOptions``."""

from __future__ import annotations

from glue_sparse.cli.options import options_from
from glue_sparse.experiments.pretrain import PretrainOptions, run_pretrain

PARSER_DATACLASSES = (PretrainOptions,)


def run(args) -> int:
    record = run_pretrain(options_from(args, PretrainOptions))
    return 0 if record.get("status") == "complete" else 1
