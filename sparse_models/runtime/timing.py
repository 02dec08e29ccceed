"""One timing loop for every measurement: the speed table, the bench's latency, the pre-training report
and ``merge_and_unload``'s layout costs.

Subjects (models, layouts, matrix sets) take turns step by step within a round, so a slow stretch of a
shared machine hits every subject alike even when it lasts less than one pass; a warm-up round is
dropped, and accelerator work is waited for around each step so the clock reads what the step took.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import torch
from torch import nn


def synchronize(devices: Iterable[torch.device]) -> None:
    """Wait for queued accelerator work (no-op on CPU)."""
    for device in devices:
        if device.type == "cuda":
            torch.cuda.synchronize(device)


def interleaved_rounds(steps: Sequence[Sequence[Callable[[], Any]]], rounds: int,
                       devices: Iterable[torch.device] = (), alternate: bool = True,
                       budget_s: float | None = None, min_rounds: int = 1) -> list[list[float]]:
    """Seconds per round for each subject, ``rounds`` rounds after a dropped warm-up round.

    ``steps[i]`` are subject i's calls in one round (every subject has as many); within a round the
    subjects take turns call by call, in reversed order every other round with ``alternate``. With
    ``budget_s``, fewer rounds (at least ``min_rounds``) when the warm-up round says ``rounds`` would take
    longer."""
    devices = list(devices)
    samples: list[list[float]] = [[] for _ in steps]
    planned, round_index = rounds, 0
    while round_index <= planned:
        round_start = time.perf_counter()
        totals = [0.0] * len(steps)
        order = list(range(len(steps)))[:: -1 if alternate and round_index % 2 else 1]
        for calls in zip(*steps, strict=True):
            for i in order:
                synchronize(devices)
                start = time.perf_counter()
                calls[i]()
                synchronize(devices)
                totals[i] += time.perf_counter() - start
        if round_index:
            for subject, total in zip(samples, totals):
                subject.append(total)
        elif budget_s is not None:
            per_round = max(time.perf_counter() - round_start, 1e-9)
            planned = max(min_rounds, min(rounds, int(budget_s / per_round)))
        round_index += 1
    return samples


@dataclass(frozen=True)
class Speedup:
    """dense / pruned time, paired round by round: ``median`` is what tables report; ``low``/``high`` the
    slowest and fastest round, so a reader sees whether a target is met with room or by noise."""

    median: float
    low: float
    high: float


def paired_speedup(dense: Sequence[float], pruned: Sequence[float]) -> Speedup:
    """Median and range of the per-round ratios. Both models of a round ran back to back, so a ratio
    within a round cancels the machine's drift that a ratio of two medians would keep."""
    ratios = [d / p for d, p in zip(dense, pruned, strict=True)]
    return Speedup(statistics.median(ratios), min(ratios), max(ratios))


@torch.inference_mode()
def time_rounds(models: Sequence[nn.Module], batches: Sequence[dict], rounds: int) -> list[list[float]]:
    """Seconds per pass over ``batches`` for each model, one sample per round; a warm-up round is dropped.

    Within a round the models take turns batch by batch (dense, pruned, dense, pruned, ...), in reversed
    order every other round (``interleaved_rounds``). With turns of whole 8-batch passes the rounds'
    ratios for one pruned MiniLM spanned 0.28 on average; with turns per batch, 0.10, around the same
    median (``benchmarks/results/timing_interleave_ab``)."""
    devices = {next(model.parameters()).device for model in models}
    steps = [[(lambda m=model, b=batch: m(**b)) for batch in batches] for model in models]
    return interleaved_rounds(steps, rounds, devices)


def time_forwards(models: Sequence[nn.Module], batches: Sequence[dict], rounds: int) -> list[float]:
    """Median seconds per pass over ``batches`` for each model, rounds interleaved, first round dropped."""
    return [statistics.median(s) for s in time_rounds(models, batches, rounds)]


def mean_length(batches: Sequence[dict]) -> int:
    """Mean padded length of ``batches``: the token count the layout is chosen for is batch x this."""
    return round(statistics.mean(b["input_ids"].shape[1] for b in batches))
