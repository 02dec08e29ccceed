"""``glue-sparse report``: tables and plots from a bench results store."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from glue_sparse.bench.options import BenchConfig, BenchConfigError
from glue_sparse.bench.store import read_stores
from glue_sparse.common.targets import DEFAULT_BENCH_TARGETS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", required=True, nargs="+", action="extend",
                   help="bench results.jsonl file(s); several report the parts of one grid together")
    p.add_argument("--out", required=True, help="folder for report.md, report.csv and the plots")
    p.add_argument("--convention", default="default", help="default, leaderboard or bert_paper")
    p.add_argument("--title", default="glue-sparse benchmark")
    p.add_argument("--config", help="the bench config whose targets block to judge by (default: targets.json's)")


def run(args: argparse.Namespace) -> int:
    from glue_sparse.bench.report import write_report  # matplotlib: only when the command runs

    try:
        rows = read_stores(args.results)
        goals = BenchConfig.load(args.config).goals(args.config) if args.config else DEFAULT_BENCH_TARGETS
        paths = write_report(rows, args.out, args.convention, title=args.title, goals=goals)
    except (BenchConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(Path(paths["markdown"]).read_text())
    print(f"written: {', '.join(str(p) for p in paths.values())}")
    return 0
