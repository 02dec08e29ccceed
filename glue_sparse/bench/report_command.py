"""``glue-sparse report``: tables and plots from a bench results store. Every flag is a field of
``ReportOptions``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from glue_sparse.bench.options import (PART_FILTERS, BenchConfig, BenchConfigError, ReportOptions, check_part,
                                       in_part)
from glue_sparse.bench.store import read_stores
from glue_sparse.cli.flags import options_from
from glue_sparse.common.targets import DEFAULT_BENCH_TARGETS

PARSER_DATACLASSES = (ReportOptions,)


def run(args: argparse.Namespace) -> int:
    from glue_sparse.bench.report import write_report  # matplotlib: only when the command runs

    options = options_from(args, ReportOptions)
    try:
        rows = read_stores(options.results)
        check_part(options, rows, "row of --results", "glue-sparse report",
                   flags=[name for name, _ in PART_FILTERS])
        rows = [row for row in rows if in_part(options, row)]
        goals = BenchConfig.load(options.config).goals(options.config) if options.config else DEFAULT_BENCH_TARGETS
        paths = write_report(rows, options.output, options.convention, title=options.title, goals=goals)
    except (BenchConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(Path(paths["markdown"]).read_text())
    print(f"written: {', '.join(str(p) for p in paths.values())}")
    return 0
