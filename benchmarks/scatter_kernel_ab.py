"""Paired A/B of the kernel that writes a row-pruned output back to full width (issue #15;
results/scatter_kernel_ab/README.md).

Where a layer's closed output rows are removed but its consumer needs the full width (query, key and
value before the attention reshape), the kept rows are written into zeros. ``index_copy_`` along the
feature dimension and ``scatter_`` with the index broadcast over the tokens give the same tensor; on
this project's 2-core CPU the second ran ~2x faster in a micro-benchmark. This script times, in one
interleaved loop on SST-2 validation batches: dense, and one pruned MiniLM (``remove`` layout, so every
closed side is removed) run with A = ``index_copy_`` and B = ``scatter_`` (``PrunedLinear``'s own
forward). The two share their weights; only the scatter differs, so their per-round ratio isolates it
from this host's swings. It also prints the kernels alone at this run's token count.

    python benchmarks/scatter_kernel_ab.py [--data-dir ../shared/data/glue] [--removed 0.2,0.4,0.6] [--rounds 15]
"""

from __future__ import annotations

import torch
from paired_ab import HEADER, kernel_microseconds, random_pattern_rows, setup  # benchmarks/paired_ab.py

from glue_sparse.experiments.speed import mean_length
from sparse_models.pruned_linear import PrunedLinear


class IndexCopyScatter(PrunedLinear):
    """Kept rows written into zeros with ``index_copy_`` along the features."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.scatter_out:
            return super().forward(x)
        lead = x.shape[:-1]
        y = self._kept_rows(x)
        y = y.new_zeros(y.shape[0], self.out_features).index_copy_(1, self.out_index, y)
        return y.reshape(*lead, y.shape[-1])


def _scatters(module: torch.nn.Module) -> bool:
    return isinstance(module, PrunedLinear) and module.scatter_out


def main() -> None:
    args, dense, batches = setup(__doc__.splitlines()[0], removed="0.2,0.4,0.6")
    tokens = args.batch_size * mean_length(batches)
    generator = torch.Generator().manual_seed(0)
    for kept in (272, 320):
        index = torch.randperm(384, generator=generator)[:kept].sort().values
        y = torch.randn(tokens, kept, generator=generator)
        copy_us, scatter_us = kernel_microseconds(
            [lambda: y.new_zeros(tokens, 384).index_copy_(1, index, y),
             lambda: y.new_zeros(tokens, 384).scatter_(1, index.expand(tokens, -1), y)], rounds=40)
        print(f"kernels alone, {tokens} tokens, {kept} of 384 rows kept: index_copy_ {copy_us:.0f} us, "
              f"scatter_ {scatter_us:.0f} us ({copy_us / scatter_us:.2f}x)")
    print("A = index_copy_, B = scatter_; 'swapped' = layers that scatter (query/key/value) or add into the "
          "residual (output layers: index_add in both)")
    print(HEADER)
    random_pattern_rows(args, dense, batches, _scatters, IndexCopyScatter)


if __name__ == "__main__":
    main()
