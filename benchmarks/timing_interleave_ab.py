"""Paired A/B of how ``time_rounds`` takes turns (issue #15; results/timing_interleave_ab/README.md).

The speed table's ratio at 40% closed moved between 1.22x and 1.40x for the same code, and its rounds
within one run ranged over 0.3x, so a 1.3x target could not be called. Before, each model ran a whole
pass over the batches in turn (``per pass``); now the models take turns batch by batch, in reversed
order every other round (``per batch``, today's ``time_rounds``). Both ways time the same dense and
pruned MiniLMs (one random closed pattern, each layout) on the same batches, alternately, ``--repeats``
times in one process: a better method shows narrower round ranges and medians that agree across
repeats, without moving the medians' centre.

    python benchmarks/timing_interleave_ab.py [--data-dir ../shared/data/glue] [--removed 0.4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from typing import Sequence

import torch
from peft import get_peft_model
from torch import nn

from glue_sparse.experiments.packaged import minilm_path, model_identity
from glue_sparse.experiments.speed import (
    calibrate_closed_fraction,
    dense_and_batches,
    mean_length,
    paired_speedup,
    prune_with_layout,
    time_rounds,
)
from glue_sparse_tasks.atomic import write_json_atomic
from sparse_models import SparseGatesConfig
from sparse_models.sparse_gates.layout_costs import DEFAULT_ALIGN


@torch.inference_mode()
def time_rounds_per_pass(models: Sequence[nn.Module], batches: Sequence[dict], rounds: int) -> list[list[float]]:
    """The method ``time_rounds`` replaced: each model runs a whole pass over ``batches`` in turn."""
    samples: list[list[float]] = [[] for _ in models]
    for round_index in range(rounds + 1):
        for i, model in enumerate(models):
            start = time.perf_counter()
            for batch in batches:
                model(**batch)
            if round_index:
                samples[i].append(time.perf_counter() - start)
    return samples


METHODS = {"per pass": time_rounds_per_pass, "per batch": time_rounds}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=None)
    p.add_argument("--removed", type=float, default=0.4)
    p.add_argument("--layouts", default="auto,remove,keep")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--output", default=None, help="write the rows as JSON here")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    path = minilm_path()
    dense, batches, source = dense_and_batches(path, args.data_dir, args.batch_size, args.batches)
    gated = get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS"))
    calibrate_closed_fraction(gated, args.removed)
    layouts = args.layouts.split(",")
    length = mean_length(batches)
    models = [dense, *(prune_with_layout(gated, layout, args.batch_size * length, DEFAULT_ALIGN, length)
                       for layout in layouts)]
    print(f"{model_identity(path)}; {source}; random {args.removed:.0%} closed; batch {args.batch_size} x "
          f"{args.batches}; {args.rounds} rounds; threads {torch.get_num_threads()}")
    print(f"{'repeat':>6} {'method':>9} {'dense ms':>9}  " + "  ".join(f"{x + ' x (rounds)':>22}" for x in layouts))
    rows = []
    for repeat in range(args.repeats):
        for method, timer in METHODS.items():
            samples = timer(models, batches, args.rounds)
            dense_ms = 1000 * statistics.median(samples[0]) / len(batches)
            cells = []
            for layout, pruned in zip(layouts, samples[1:]):
                s = paired_speedup(samples[0], pruned)
                rows.append({"repeat": repeat, "method": method, "layout": layout, "dense_ms": dense_ms,
                             "median": s.median, "low": s.low, "high": s.high})
                cells.append(f"{s.median:>8.3f} ({s.low:.2f}-{s.high:.2f})")
            print(f"{repeat:>6} {method:>9} {dense_ms:>9.1f}  " + "  ".join(f"{c:>22}" for c in cells), flush=True)
    print("\nper method and layout: median of the repeats' medians, their spread, mean round range")
    for method in METHODS:
        for layout in layouts:
            mine = [r for r in rows if r["method"] == method and r["layout"] == layout]
            medians = [r["median"] for r in mine]
            width = statistics.mean(r["high"] - r["low"] for r in mine)
            print(f"{method:>9} {layout:>7}: {statistics.median(medians):.3f} (repeats {min(medians):.3f}-"
                  f"{max(medians):.3f}), mean round range {width:.3f}")
    if args.output:
        write_json_atomic(args.output, {"model": model_identity(path), "texts": source, "removed": args.removed,
                                        "batch_size": args.batch_size, "batches": args.batches,
                                        "rounds": args.rounds, "threads": torch.get_num_threads(), "rows": rows})


if __name__ == "__main__":
    main()
