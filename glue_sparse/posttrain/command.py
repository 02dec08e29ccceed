"""``glue-sparse posttrain``: sparse-gate post-training of a causal LM, dense vs pruned. Every flag is a
field of ``PosttrainOptions``."""

from __future__ import annotations

from glue_sparse.cli.flags import options_from
from glue_sparse.common.option_fields import SeedsOption, per_seed
from glue_sparse.posttrain.options import PosttrainOptions

PARSER_DATACLASSES = (PosttrainOptions, SeedsOption)


def run(args) -> int:
    from glue_sparse.posttrain.run import run_posttrain
    from glue_sparse.posttrain.structured import run_structured_posttrain  # torch: only when it runs

    for options in per_seed(options_from(args, PosttrainOptions), args.seeds, "out_dir"):
        if options.method == "gates-rowcol":
            run_posttrain(options)
        else:
            run_structured_posttrain(options)
    return 0
