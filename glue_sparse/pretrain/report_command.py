"""``glue-sparse pretrain-report``: dense and gated pre-training twins in one table and plot, with the
targets stated. Every flag is a field of ``PretrainReportOptions``."""

from __future__ import annotations

from glue_sparse.cli.flags import options_from
from glue_sparse.pretrain.options import PretrainReportOptions

PARSER_DATACLASSES = (PretrainReportOptions,)


def run(args) -> int:
    from glue_sparse.pretrain.report import write_pretrain_report  # torch: only when it runs

    write_pretrain_report(options_from(args, PretrainReportOptions))
    return 0
