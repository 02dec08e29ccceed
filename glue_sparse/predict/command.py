"""``glue-sparse predict``: a GLUE-server submission from a fine-tuning run or lm-eval samples. Every flag is a
field of ``PredictOptions``."""

from __future__ import annotations

import argparse

from glue_sparse.cli.flags import options_from
from glue_sparse.predict.options import PredictOptions

PARSER_DATACLASSES = (PredictOptions,)


def run(args: argparse.Namespace) -> int:
    from glue_sparse.predict.run import predict  # lm-eval and torch (for --run): only when the command runs

    predict(options_from(args, PredictOptions))
    return 0  # a missing task is said in the note; the zip holds the tasks present
