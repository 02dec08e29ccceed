"""Paired A/B of the multiple kept row/column counts are rounded up to (issue #15;
results/alignment_ab/README.md).

Odd matrix widths hit slow CPU kernels, so a pruned layer keeps enough closed rows/columns (folded zeros)
to make its kept counts a multiple of ``align``. Every row kept that way is computed for nothing. This
script prints plain ``F.linear`` calls at output widths around the kept counts of a 40% pattern (the
kernel cost of a width), then times, in one interleaved loop on SST-2 validation batches: dense, and one
pruned MiniLM per removal level (``remove`` layout) built with A = ``--align-a`` and B = ``--align-b``.
The two compute the same function; only their kept widths differ.

    python benchmarks/alignment_ab.py [--data-dir ../shared/data/glue] [--removed 0.2,0.4,0.6] \\
        [--align-a 16] [--align-b 8]
"""

from __future__ import annotations

import argparse
import copy

import torch
from paired_ab import HEADER, kernel_microseconds, paired_line, setup  # benchmarks/paired_ab.py
from peft import get_peft_model
from torch.nn import functional as F

from glue_sparse.experiments.speed import calibrate_closed_fraction, mean_length, prune_with_layout
from sparse_models import SparseGatesConfig
from sparse_models.accounting import parameter_accounting


def _widths(tokens: int, rounds: int = 60) -> list[str]:
    """GFLOP/s of ``F.linear`` at output widths that are multiples of 16, 8, 4 and odd (two input widths)."""
    generator = torch.Generator().manual_seed(0)
    shapes = [(out, 320) for out in (312, 313, 316, 320)] + [(out, 384) for out in (1272, 1276, 1280, 1281)]
    operands = [(torch.randn(tokens, i, generator=generator), torch.randn(o, i, generator=generator), torch.zeros(o))
                for o, i in shapes]
    microseconds = kernel_microseconds([lambda x=x, w=w, b=b: F.linear(x, w, b) for x, w, b in operands], rounds,
                                       same=False)
    return [f"F.linear {tokens} x {i} -> {o:>4} outputs: {2 * tokens * o * i / us / 1e3:6.1f} GFLOP/s"
            for (o, i), us in zip(shapes, microseconds)]


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--align-a", type=int, default=16)
    p.add_argument("--align-b", type=int, default=8)


def main() -> None:
    args, dense, batches = setup(__doc__.splitlines()[0], removed="0.2,0.4,0.6", extra=_flags)
    length = mean_length(batches)
    tokens = args.batch_size * length
    print("\n".join(_widths(tokens)))
    print(f"A = align {args.align_a}, B = align {args.align_b}; 'swapped' = physically removed % of gated weights "
          "in B minus in A (points)")
    print(HEADER)
    for level in (float(x) for x in args.removed.split(",")):
        gated = get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS"))
        calibrate_closed_fraction(gated, level)
        a, b = (prune_with_layout(gated, "remove", tokens, align, length) for align in (args.align_a, args.align_b))
        gained = 100 * (parameter_accounting(b).removed_share_of_gated - parameter_accounting(a).removed_share_of_gated)
        print(paired_line(f"random {level:.0%}", round(gained, 1), dense, a, b, batches, args.rounds, atol=1e-4),
              flush=True)


if __name__ == "__main__":
    main()
