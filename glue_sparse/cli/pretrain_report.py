"""``glue-sparse pretrain-report``: dense and gated pre-training twins in one table and plot, with the
targets stated. Every flag is a field of ``PretrainReportOptions``."""

from __future__ import annotations

from glue_sparse.cli.options import options_from
from glue_sparse.experiments.pretrain_report import PretrainReportOptions, write_pretrain_report

PARSER_DATACLASSES = (PretrainReportOptions,)


def run(args) -> int:
    write_pretrain_report(options_from(args, PretrainReportOptions))
    return 0
