"""``glue-sparse bench``'s work: record the grid's config beside its store, run the grid (``grid.py``) and
write its report (``report.py``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from glue_sparse.bench.grid import run_bench
from glue_sparse.bench.options import BenchConfig
from glue_sparse.bench.report import write_report
from glue_sparse.bench.store import read_store

CONFIG_FILE = "bench_config.json"


def bench_and_report(bench: BenchConfig, output: str | Path, convention: str = "default", executor: str = "local",
                     address: str | None = None, retries: int = 2,
                     retime_latency: bool = False) -> tuple[Path, dict[str, Path]]:
    """Run every missing cell of ``bench`` into ``output`` and report the whole store; (store, report paths)."""
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    (output / CONFIG_FILE).write_text(json.dumps(bench.to_dict(), indent=2, default=str) + "\n")
    store = run_bench(bench, output, log=logging.getLogger("glue_sparse").info, executor=executor, address=address,
                      retries=retries, retime_latency=retime_latency)
    return store, write_report(read_store(store), output / "report", convention, goals=bench.goals())


def summary(store: Path, paths: dict[str, Any]) -> str:
    """Where the results, report, table and plots are."""
    return (f"\nresults: {store}\nreport:  {paths['markdown']}\ncsv:     {paths['csv']}\n"
            f"plots:   {', '.join(str(paths[k]) for k in ('score_plot', 'latency_plot', 'frontier_plot') if k in paths)}")
