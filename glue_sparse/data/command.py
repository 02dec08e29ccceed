"""``glue-sparse data``: which GLUE splits are where. Every flag is a field of ``DataOptions``."""

from __future__ import annotations

import argparse

from glue_sparse.cli.flags import options_from
from glue_sparse.data.options import DataOptions

PARSER_DATACLASSES = (DataOptions,)


def run(args: argparse.Namespace) -> int:
    from glue_sparse.data.run import show_splits  # reads data: only when the command runs

    return show_splits(options_from(args, DataOptions))
