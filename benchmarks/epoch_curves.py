"""Per-epoch validation scores of a bench's finished runs: the one-seed sweep that sets the epoch budget.

Every run evaluates after each epoch (``run.json`` → ``epochs``), so one 5-epoch run per method shows
where its score levels off. Prints a markdown table per method (task rows, epoch columns, and the
5-task mean of the primary metrics) and writes it, with the rows, to ``--out`` (atomically).

    python benchmarks/epoch_curves.py --bench bench/converged --seed 1 --out benchmarks/results/converged_sweep
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from glue_sparse_tasks.atomic import write_text_atomic
from glue_sparse_tasks.scoring import primary_metric


def curves(bench: Path, seed: int, regime: str = "limited") -> dict[str, dict[str, list[float]]]:
    """{method label: {task: [primary metric after epoch 1, 2, ...]}} for every finished run."""
    out: dict[str, dict[str, list[float]]] = {}
    for run_json in sorted(bench.glob(f"runs/*/{regime}/seed-{seed}/*/run.json")):
        record = json.loads(run_json.read_text())
        label = run_json.parts[-5]
        metric = primary_metric(record["task"])
        out.setdefault(label, {})[record["task"]] = [e[metric] for e in record["epochs"] if metric in e]
    return out


def markdown(table: dict[str, dict[str, list[float]]]) -> str:
    lines = []
    for label, tasks in table.items():
        epochs = max(len(v) for v in tasks.values())
        lines += [f"### {label}", "", "| task | " + " | ".join(f"epoch {e + 1}" for e in range(epochs)) + " |",
                  "|---|" + "---:|" * epochs]
        for task, scores in sorted(tasks.items()):
            lines.append(f"| {task} ({primary_metric(task)}) | " + " | ".join(f"{100 * s:.1f}" for s in scores) + " |")
        if all(len(v) == epochs for v in tasks.values()):
            means = [statistics.fmean(v[e] for v in tasks.values()) for e in range(epochs)]
            lines.append(f"| mean of {len(tasks)} tasks | " + " | ".join(f"{100 * m:.1f}" for m in means) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", required=True, help="a bench output folder (holds runs/)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--regime", default="limited")
    parser.add_argument("--out", help="folder for curves.md and curves.json")
    args = parser.parse_args()
    table = curves(Path(args.bench), args.seed, args.regime)
    text = markdown(table)
    print(text)
    if args.out:
        write_text_atomic(Path(args.out) / "curves.md", text + "\n")
        write_text_atomic(Path(args.out) / "curves.json", json.dumps(table, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
