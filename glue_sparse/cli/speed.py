"""``glue-sparse speed``: dense vs physically pruned CPU latency. Every flag is a field of ``SpeedOptions``."""

from __future__ import annotations

from glue_sparse.cli.options import options_from
from glue_sparse.experiments.speed import SpeedOptions, run_speed

HELP = "dense vs physically pruned CPU latency and FLOP ratios (default: packaged MiniLM)"
PARSER_DATACLASSES = (SpeedOptions,)


def run(args) -> int:
    run_speed(options_from(args, SpeedOptions))
    return 0
