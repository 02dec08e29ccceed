"""``glue-sparse speed``: dense vs physically pruned CPU latency. Every flag is a field of ``SpeedOptions``."""

from __future__ import annotations

from glue_sparse.cli.options import options_from
from glue_sparse.experiments.causal_speed import run_causal_speed
from glue_sparse.experiments.speed import SpeedOptions, run_speed

PARSER_DATACLASSES = (SpeedOptions,)


def run(args) -> int:
    options = options_from(args, SpeedOptions)
    (run_causal_speed if options.causal else run_speed)(options)
    return 0
