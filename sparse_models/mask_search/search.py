"""Which heads and channels to remove (Kwon et al. 2022, Sec. 4.2 and 4.3), under a removal budget
stated in weights instead of the paper's FLOPs.

*Search*: with the diagonal Fisher, removing a set of units raises the loss by about half the sum of
their diagonal entries, so for every number of heads removed the cheapest heads go first and the rest
of the budget takes the cheapest channels; the count of heads whose total is lowest wins. *Rearrangement*:
the search fixes how many units each layer loses; within a layer the units interact, so the set is
chosen again greedily under that layer's block of the Fisher matrix (the removed set ``z`` minimising
``z^T I z``), kept only where it beats the diagonal choice on that same objective.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["RemovalPlan", "search_counts", "rearrange"]


@dataclass(frozen=True)
class RemovalPlan:
    """Removed units per layer (indices) and the weights they hold."""

    heads: list[list[int]]
    channels: list[list[int]]
    removed_weights: int


def _lowest(values: torch.Tensor, count: int) -> list[int]:
    return sorted(torch.argsort(values, stable=True)[:count].tolist())


def search_counts(head_importance: torch.Tensor, channel_importance: torch.Tensor, head_cost: int,
                  channel_cost: int, budget: int) -> RemovalPlan:
    """The heads and channels (per layer, by diagonal Fisher) whose removal comes nearest ``budget``
    weights at the lowest total importance. ``*_importance`` are ``[layers, units]``."""
    layers, per_layer_heads = head_importance.shape
    flat_heads, flat_channels = head_importance.flatten(), channel_importance.flatten()
    head_order = torch.argsort(flat_heads, stable=True)
    channel_order = torch.argsort(flat_channels, stable=True)
    head_sums = torch.cat([torch.zeros(1, dtype=torch.float64), flat_heads[head_order].double().cumsum(0)])
    channel_sums = torch.cat([torch.zeros(1, dtype=torch.float64), flat_channels[channel_order].double().cumsum(0)])
    best: tuple[float, int, int] | None = None
    for removed_heads in range(len(flat_heads) + 1):
        rest = budget - removed_heads * head_cost
        if rest < -channel_cost / 2:
            break
        removed_channels = min(len(flat_channels), max(0, round(rest / channel_cost)))
        cost = float(head_sums[removed_heads] + channel_sums[removed_channels])
        if best is None or cost < best[0]:
            best = (cost, removed_heads, removed_channels)
    _, removed_heads, removed_channels = best
    heads: list[list[int]] = [[] for _ in range(layers)]
    channels: list[list[int]] = [[] for _ in range(layers)]
    per_layer_channels = channel_importance.shape[1]
    for index in head_order[:removed_heads].tolist():
        heads[index // per_layer_heads].append(index % per_layer_heads)
    for index in channel_order[:removed_channels].tolist():
        channels[index // per_layer_channels].append(index % per_layer_channels)
    return RemovalPlan([sorted(h) for h in heads], [sorted(c) for c in channels],
                       removed_heads * head_cost + removed_channels * channel_cost)


def _loss_rise(block: torch.Tensor, removed: list[int]) -> float:
    index = torch.tensor(removed, dtype=torch.long)
    return float(block[index][:, index].sum()) if removed else 0.0


def rearrange(gradients: torch.Tensor, removed: list[int]) -> list[int]:
    """The same number of units as ``removed``, chosen greedily under the block Fisher ``I = E[g g^T]`` of
    one layer's per-example mask gradients ``[examples, units]``: each step removes the unit that raises
    ``z^T I z`` least. The diagonal choice stays where the greedy set is no better."""
    count = len(removed)
    if count == 0 or count == gradients.shape[1]:
        return removed
    g = gradients.double()
    block = g.T @ g / g.shape[0]
    chosen: list[int] = []
    cross = torch.zeros(block.shape[0], dtype=torch.float64)  # (I z) for the removed set so far
    taken = torch.zeros(block.shape[0], dtype=torch.bool)
    for _ in range(count):
        rise = torch.where(taken, torch.inf, 2 * cross + block.diagonal())
        unit = int(torch.argmin(rise))
        chosen.append(unit)
        taken[unit] = True
        cross += block[:, unit]
    chosen.sort()
    return chosen if _loss_rise(block, chosen) < _loss_rise(block, removed) else removed
