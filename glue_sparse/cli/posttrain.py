"""``glue-sparse posttrain``: sparse-gate post-training of a causal LM, dense vs pruned. Every flag is a
field of ``PosttrainOptions``."""

from __future__ import annotations

from glue_sparse.cli.options import options_from
from glue_sparse.experiments.causal_pruning import run_structured_posttrain
from glue_sparse.experiments.posttrain import PosttrainOptions, run_posttrain

PARSER_DATACLASSES = (PosttrainOptions,)


def run(args) -> int:
    options = options_from(args, PosttrainOptions)
    if options.method == "gates-rowcol":
        run_posttrain(options)
    else:
        run_structured_posttrain(options)
    return 0
