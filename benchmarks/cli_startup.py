"""Start-up cost of the ``glue-sparse`` CLI (issue #39, item 5): wall time of ``--help`` calls against
``python -c pass``, median of N runs each, printed with the ratio. Run on an otherwise idle machine:

    python benchmarks/cli_startup.py --runs 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

_CLI = [sys.executable, "-m", "glue_sparse.cli.main"]
CALLS = {"python -c pass": [sys.executable, "-c", "pass"],
         "glue-sparse --help": [*_CLI, "--help"],
         "glue-sparse data --help": [*_CLI, "data", "--help"],
         "glue-sparse data --no-hub --tasks rte": [*_CLI, "data", "--no-hub", "--tasks", "rte"],
         "glue-sparse finetune --help": [*_CLI, "finetune", "--help"],
         "glue-sparse pretrain --help": [*_CLI, "pretrain", "--help"]}


def median_seconds(cmd: list[str], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    base = median_seconds(CALLS["python -c pass"], runs)
    print(f"| call | median s ({runs} runs) | x python -c pass |\n|---|---:|---:|")
    for name, cmd in CALLS.items():
        seconds = base if name == "python -c pass" else median_seconds(cmd, runs)
        print(f"| `{name}` | {seconds:.3f} | {seconds / base:.1f} |")


if __name__ == "__main__":
    main()
