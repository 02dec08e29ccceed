"""``glue-sparse speed``: dense vs physically pruned latency on --device. Every flag is a field of ``SpeedOptions``."""

from __future__ import annotations

from glue_sparse.cli.flags import options_from
from glue_sparse.speed.options import SpeedOptions

PARSER_DATACLASSES = (SpeedOptions,)


def run(args) -> int:
    from glue_sparse.speed.causal import run_causal_speed  # torch: only when the command runs
    from glue_sparse.speed.run import run_speed

    options = options_from(args, SpeedOptions)
    (run_causal_speed if options.causal else run_speed)(options)
    return 0
