"""``glue-sparse demo``: the README's main job (``scripts/main.sh``). Every flag is a field of
``DemoOptions``."""

from __future__ import annotations

import argparse

from glue_sparse.cli.flags import options_from
from glue_sparse.demo.options import DemoOptions

PARSER_DATACLASSES = (DemoOptions,)


def run(args: argparse.Namespace) -> int:
    from glue_sparse.demo.run import run_demo  # torch and lm-eval: only when the command runs

    run_demo(options_from(args, DemoOptions))
    return 0
