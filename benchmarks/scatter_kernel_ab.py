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

import copy
import statistics
import time

import torch
from paired_ab import HEADER, paired_line, setup, swapped  # benchmarks/paired_ab.py
from peft import get_peft_model

from glue_sparse.experiments.speed import calibrate_closed_fraction, mean_length
from sparse_models import SparseGatesConfig
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


@torch.inference_mode()
def _kernels(tokens: int, width: int, kept: int, rounds: int = 40) -> tuple[float, float]:
    """Median microseconds of the two kernels alone on a (tokens, kept) output, interleaved."""
    generator = torch.Generator().manual_seed(0)
    index = torch.randperm(width, generator=generator)[:kept].sort().values
    y = torch.randn(tokens, kept, generator=generator)
    calls = (lambda: y.new_zeros(tokens, width).index_copy_(1, index, y),
             lambda: y.new_zeros(tokens, width).scatter_(1, index.expand(tokens, -1), y))
    assert torch.equal(calls[0](), calls[1]())
    samples: list[list[float]] = [[], []]
    for _ in range(rounds):
        for i, call in enumerate(calls):
            start = time.perf_counter()
            call()
            samples[i].append(time.perf_counter() - start)
    return tuple(1e6 * statistics.median(s) for s in samples)


def main() -> None:
    args, dense, batches = setup(__doc__.splitlines()[0], removed="0.2,0.4,0.6")
    tokens = args.batch_size * mean_length(batches)
    for kept in (272, 320):
        copy_us, scatter_us = _kernels(tokens, 384, kept)
        print(f"kernels alone, {tokens} tokens, {kept} of 384 rows kept: index_copy_ {copy_us:.0f} us, "
              f"scatter_ {scatter_us:.0f} us ({copy_us / scatter_us:.2f}x)")
    print("A = index_copy_, B = scatter_; 'swapped' = layers that scatter (query/key/value) or add into the "
          "residual (output layers: index_add in both)")
    print(HEADER)
    for level in (float(x) for x in args.removed.split(",")):
        gated = get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS"))
        calibrate_closed_fraction(gated, level)
        pruned = gated.eval().merge_and_unload(layout="remove")

        def scatters(module: torch.nn.Module) -> bool:
            return isinstance(module, PrunedLinear) and module.scatter_out

        old, count = swapped(pruned, scatters, IndexCopyScatter)
        print(paired_line(f"random {level:.0%}", count, dense, old, pruned, batches, args.rounds), flush=True)


if __name__ == "__main__":
    main()
