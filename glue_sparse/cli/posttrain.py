"""``glue-sparse posttrain``: sparse-gate post-training of a causal LM, dense vs pruned. Every flag is a
field of ``PosttrainOptions``."""

from __future__ import annotations

from glue_sparse.cli.options import options_from
from glue_sparse.experiments.posttrain import PosttrainOptions, run_posttrain

HELP = "sparse-gate post-training of a causal LM, dense vs gated vs pruned"
PARSER_DATACLASSES = (PosttrainOptions,)


def run(args) -> int:
    run_posttrain(options_from(args, PosttrainOptions))
    return 0
