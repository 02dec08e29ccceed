"""Paired A/B of the kernel that writes a row-pruned output back to full width (issue #15;
results/scatter_kernel_ab/README.md).

Where a layer's closed output rows are removed but its consumer needs the full width (query, key and
value before the attention reshape), the kept rows are written into zeros. ``index_copy_`` along the
feature dimension and ``scatter_`` with the index broadcast over the tokens give the same tensor; on
this project's 2-core CPU the second ran ~2x faster in a micro-benchmark. This script times, in one
interleaved loop on SST-2 validation batches: dense, and one pruned MiniLM (``remove`` layout, so every
closed side is removed) run with each kernel. The two pruned variants share their weights; only the
scatter differs, so their per-round ratio isolates it from this host's swings. It also prints the
kernels alone at this run's token count.

    python benchmarks/scatter_kernel_ab.py [--data-dir ../shared/data/glue] [--removed 0.2,0.4,0.6] [--rounds 15]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
from peft import get_peft_model

from glue_sparse.experiments.packaged import minilm_path
from glue_sparse.experiments.speed import calibrate_closed_fraction, dense_and_batches, mean_length, time_rounds
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


class BroadcastScatter(PrunedLinear):
    """Kept rows written into zeros with ``scatter_`` and the index broadcast over the tokens."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.scatter_out:
            return super().forward(x)
        lead = x.shape[:-1]
        y = self._kept_rows(x)
        y = y.new_zeros(y.shape[0], self.out_features).scatter_(1, self.out_index.expand(y.shape[0], -1), y)
        return y.reshape(*lead, y.shape[-1])


def _as(model: torch.nn.Module, cls: type) -> tuple[torch.nn.Module, int]:
    """A copy of ``model`` whose scattering ``PrunedLinear`` layers run ``cls``'s forward."""
    model = copy.deepcopy(model)
    swapped = 0
    for module in model.modules():
        if isinstance(module, PrunedLinear) and module.scatter_out:
            module.__class__ = cls
            swapped += 1
    return model, swapped


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
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=None)
    p.add_argument("--removed", default="0.2,0.4,0.6")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    dense, batches, source = dense_and_batches(minilm_path(), args.data_dir, args.batch_size, args.batches)
    tokens = args.batch_size * mean_length(batches)
    print(f"{source}; batch {args.batch_size} x {args.batches}; {args.rounds} rounds; "
          f"threads {torch.get_num_threads()}")
    for kept in (272, 320):
        copy_us, scatter_us = _kernels(tokens, 384, kept)
        print(f"kernels alone, {tokens} tokens, {kept} of 384 rows kept: index_copy_ {copy_us:.0f} us, "
              f"scatter_ {scatter_us:.0f} us ({copy_us / scatter_us:.2f}x)")
    print(f"{'closed':>7} {'scatter layers':>14} {'dense ms':>9} {'index_copy_ ms':>14} {'scatter_ ms':>11} "
          f"{'dense/index_copy_':>17} {'dense/scatter_':>14} {'index_copy_/scatter_ (rounds)':>30}")
    for level in (float(x) for x in args.removed.split(",")):
        gated = get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS"))
        calibrate_closed_fraction(gated, level)
        pruned = gated.eval().merge_and_unload(layout="remove")
        old, swapped = _as(pruned, IndexCopyScatter)
        new, _ = _as(pruned, BroadcastScatter)
        with torch.inference_mode():
            assert all(torch.equal(old(**b).logits, new(**b).logits) for b in batches)  # exact
        d, o, n = time_rounds([dense, old, new], batches, args.rounds)
        ratios = [oi / ni for oi, ni in zip(o, n)]
        ms = [1000 * statistics.median(x) / len(batches) for x in (d, o, n)]
        print(f"{level:>7.0%} {swapped:>14} {ms[0]:>9.2f} {ms[1]:>14.2f} {ms[2]:>11.2f} "
              f"{statistics.median(di / oi for di, oi in zip(d, o)):>17.3f} "
              f"{statistics.median(di / ni for di, ni in zip(d, n)):>14.3f} "
              f"{statistics.median(ratios):>12.3f} ({min(ratios):.3f}-{max(ratios):.3f})", flush=True)


if __name__ == "__main__":
    main()
