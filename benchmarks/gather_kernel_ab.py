"""Paired A/B of the kernel that reads a column-pruned layer's kept inputs (issue #15;
results/gather_kernel_ab/README.md).

Where a layer's closed input columns are removed but its input arrives at full width (query, key, value,
the FFN input and, in the ``remove`` layout, the attention output), the kept columns are gathered.
``index_select`` along the features runs on one CPU thread; ``torch.gather`` with the index broadcast
over the tokens splits them over threads. This script prints both kernels alone at a range of token
counts, then times, in one interleaved loop on SST-2 validation batches: dense, and one pruned MiniLM
(``remove`` layout) run with A = ``index_select`` always and B = ``PrunedLinear``'s own gather (``gather``
from ``PARALLEL_GATHER_MIN`` values on more than one thread). The two share their weights; only the
gather differs, so their per-round ratio isolates it from this host's swings.

    python benchmarks/gather_kernel_ab.py [--data-dir ../shared/data/glue] [--removed 0.2,0.4,0.6] [--rounds 15]
"""

from __future__ import annotations

import torch
from paired_ab import HEADER, kernel_microseconds, random_pattern_rows, setup  # benchmarks/paired_ab.py

from glue_sparse.experiments.speed import mean_length
from sparse_models.pruned_linear import PrunedLinear


class IndexSelectGather(PrunedLinear):
    """Kept columns read with ``index_select`` along the features at every size."""

    def _gathered(self, x: torch.Tensor) -> torch.Tensor:
        return x.index_select(1, self.in_index)


def _gathers(module: torch.nn.Module) -> bool:
    return isinstance(module, PrunedLinear) and module.gather_in


def main() -> None:
    args, dense, batches = setup(__doc__.splitlines()[0], removed="0.2,0.4,0.6")
    generator = torch.Generator().manual_seed(0)
    index = torch.randperm(384, generator=generator)[:320].sort().values
    for n in sorted({32, 128, 256, 512, 1024, args.batch_size * mean_length(batches), 4096}):
        x = torch.randn(n, 384, generator=generator)
        select_us, gather_us = kernel_microseconds(
            [lambda: x.index_select(1, index), lambda: torch.gather(x, 1, index.expand(n, -1))], rounds=200)
        print(f"kernels alone, {n:>5} tokens, 320 of 384 columns: index_select {select_us:7.1f} us, "
              f"gather {gather_us:7.1f} us ({select_us / gather_us:.2f}x)")
    print("A = index_select, B = PrunedLinear's gather; 'swapped' = layers that gather their input")
    print(HEADER)
    random_pattern_rows(args, dense, batches, _gathers, IndexSelectGather)


if __name__ == "__main__":
    main()
