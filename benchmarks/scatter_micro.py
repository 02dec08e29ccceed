"""Micro-benchmark behind the scatter-as-gather trial (issue #15; results/scatter_gather_ab/README.md).

A row-pruned output of (tokens x kept) goes back to the (tokens x 384) residual width. Times, interleaved
over rounds, the median of: ``index_copy_`` into zeros (what ``PrunedLinear`` does), a pad with one zero
column plus ``index_select`` (the reverted trial), each followed by the residual add, and ``index_add``
straight into a copy of the residual (a fused residual add, not built). The whole-model runs decided.

    python benchmarks/scatter_micro.py [--threads 1] [--tokens 2048] [--kept 320]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.nn import functional as F


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--width", type=int, default=384)
    p.add_argument("--kept", type=int, default=320)
    p.add_argument("--rounds", type=int, default=30)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    index = torch.randperm(args.width, generator=g)[:args.kept].sort().values
    gather = torch.full((args.width,), args.kept, dtype=torch.long)
    gather[index] = torch.arange(args.kept)
    y, residual = torch.randn(args.tokens, args.kept), torch.randn(args.tokens, args.width)
    ops = {
        "index_copy_ into zeros + add":
            lambda: y.new_zeros(args.tokens, args.width).index_copy_(1, index, y) + residual,
        "pad + index_select + add": lambda: F.pad(y, (0, 1)).index_select(1, gather) + residual,
        "index_add into the residual": lambda: residual.index_add(1, index, y),
    }
    first = next(iter(ops.values()))()
    assert all(torch.equal(first, op()) for op in ops.values())  # all three are exact
    times: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(args.rounds):
        for name, op in ops.items():
            start = time.perf_counter()
            op()
            times[name].append(time.perf_counter() - start)
    for name, samples in times.items():
        print(f"{name:<32} {statistics.median(samples) * 1e3:7.3f} ms")


if __name__ == "__main__":
    main()
