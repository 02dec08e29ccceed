"""``glue-sparse export``: a run's checkpoints as Hub-ready folders. Every flag is a field of ``ExportOptions``."""

from __future__ import annotations

import argparse

from glue_sparse.cli.flags import options_from
from glue_sparse.export.options import ExportOptions

PARSER_DATACLASSES = (ExportOptions,)


def run(args: argparse.Namespace) -> int:
    from glue_sparse.export.run import export_run  # torch and transformers: only when the command runs

    for folder in export_run(options_from(args, ExportOptions)):
        print(folder)
    return 0
