"""Shared by the paired forward A/Bs (``scatter_kernel_ab.py``, ``narrowed_attention_ab.py``): one pruned
model run two ways that differ only in one module class's forward, timed beside dense in one interleaved
loop, so the per-round ratio of the two isolates that forward from this host's swings."""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from typing import Callable, Sequence

import torch
from peft import get_peft_model
from torch import nn

from glue_sparse.experiments.packaged import minilm_path
from glue_sparse.experiments.speed import calibrate_closed_fraction, dense_and_batches, paired_speedup, time_rounds
from sparse_models import SparseGatesConfig

HEADER = (f"{'pattern':<46} {'swapped':>7} {'dense ms':>9} {'A ms':>8} {'B ms':>8} {'dense/A':>8} {'dense/B':>8} "
          f"{'A/B (rounds)':>22}")


def setup(description: str, removed: str,
          extra: Callable[[argparse.ArgumentParser], None] | None = None,
          ) -> tuple[argparse.Namespace, nn.Module, list[dict]]:
    """Parse the shared flags (and ``extra``'s), set the threads, load dense MiniLM and its SST-2 batches,
    and print what the run times."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--removed", default=removed, help="shares of gated weights closed by random patterns")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--threads", type=int, default=2)
    if extra:
        extra(p)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    dense, batches, source = dense_and_batches(minilm_path(), args.data_dir, args.batch_size, args.batches)
    print(f"{source}; batch {args.batch_size} x {args.batches}; {args.rounds} rounds; threads "
          f"{torch.get_num_threads()}; attention {dense.config._attn_implementation}")
    return args, dense, batches


def swapped(model: nn.Module, wanted: Callable[[nn.Module], bool], cls: type) -> tuple[nn.Module, int]:
    """A copy of ``model`` whose modules that ``wanted`` picks run ``cls``'s forward (a subclass of theirs)."""
    model = copy.deepcopy(model)
    count = 0
    for module in model.modules():
        if wanted(module):
            module.__class__ = cls
            count += 1
    return model, count


def paired_line(label: str, count: int, dense: nn.Module, a: nn.Module, b: nn.Module, batches: Sequence[dict],
                rounds: int, atol: float = 0.0) -> str:
    """Check that ``a`` and ``b`` agree (exactly, or within ``atol``), time the three, and format one row:
    milliseconds per batch and the medians of the per-round ratios (A/B with its slowest and fastest round)."""
    with torch.inference_mode():
        for batch in batches:
            difference = (a(**batch).logits - b(**batch).logits).abs().max().item()
            assert difference <= atol, f"{label}: the two variants differ by {difference}"
    d, x, y = time_rounds([dense, a, b], batches, rounds)
    a_over_b = paired_speedup(x, y)  # time of A / time of B, round by round
    ms = [1000 * statistics.median(s) / len(batches) for s in (d, x, y)]
    return (f"{label:<46} {count:>7} {ms[0]:>9.2f} {ms[1]:>8.2f} {ms[2]:>8.2f} "
            f"{paired_speedup(d, x).median:>8.3f} {paired_speedup(d, y).median:>8.3f} "
            f"{a_over_b.median:>8.3f} ({a_over_b.low:.3f}-{a_over_b.high:.3f})")


def random_pattern_rows(args: argparse.Namespace, dense: nn.Module, batches: Sequence[dict],
                        wanted: Callable[[nn.Module], bool], cls: type) -> None:
    """One paired row per ``--removed`` level: a random closed pattern pruned in the ``remove`` layout (every
    closed side removed), run as A = ``cls``'s forward on the modules ``wanted`` picks, B = its own."""
    for level in (float(x) for x in args.removed.split(",")):
        gated = get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS"))
        calibrate_closed_fraction(gated, level)
        pruned = gated.eval().merge_and_unload(layout="remove")
        old, count = swapped(pruned, wanted, cls)
        print(paired_line(f"random {level:.0%}", count, dense, old, pruned, batches, args.rounds), flush=True)


@torch.inference_mode()
def kernel_microseconds(calls: Sequence[Callable[[], torch.Tensor]], rounds: int, same: bool = True) -> list[float]:
    """Median microseconds of each call, the calls taking turns; with ``same`` all must return the same tensor."""
    if same:
        first = calls[0]()
        assert all(torch.equal(first, call()) for call in calls[1:]), "the kernels disagree"
    samples: list[list[float]] = [[] for _ in calls]
    for _ in range(rounds):
        for i, call in enumerate(calls):
            start = time.perf_counter()
            call()
            samples[i].append(time.perf_counter() - start)
    return [1e6 * statistics.median(s) for s in samples]
