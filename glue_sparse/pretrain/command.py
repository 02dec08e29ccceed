"""``glue-sparse pretrain``: a Llama of one of GaLore's sizes pre-trained from scratch on C4, dense or
gated. Every flag is a field of ``PretrainOptions``."""

from __future__ import annotations

from glue_sparse.cli.flags import options_from
from glue_sparse.pretrain.options import PretrainOptions

PARSER_DATACLASSES = (PretrainOptions,)


def run(args) -> int:
    from glue_sparse.pretrain.run import run_pretrain  # torch: only when the command runs

    record = run_pretrain(options_from(args, PretrainOptions))
    return 0 if record.get("status") == "complete" else 1
