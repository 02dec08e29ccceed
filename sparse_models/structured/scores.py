"""One-shot structured baselines for causal LMs, written from their papers' maths: which heads and FFN
channels each would remove, at an exact share of decoder-block linear weights.

- ``magnitude-sp`` (the structured magnitude baseline FLAP and LLM-Pruner report): the L2 norm of the
  unit's input column(s) of the output projection (``o_proj`` summed over a head's columns, ``down_proj``);
  the same share removed in every layer.
- ``wanda-sp`` (FLAP's structured Wanda): |W| times the input norm, summed over a unit's input columns
  of the output projection: sum_i |W_ij| * ||X_j||_2 on ``o_proj`` (summed over a head's columns) and on
  ``down_proj``; the same share in every layer.
- ``flap`` (An et al., AAAI 2024, its adaptive "AL-AM" structure with the WIFV metric): the fluctuation
  of each input channel of the output projection, F_j = Var(X_j) * ||W_:,j||^2 (squared once more on
  ``o_proj``, as the authors' metric for attention), standardised over the channels of each layer's
  ``o_proj`` and of its ``down_proj``; a head scores the mean of its channels' standardised values. One
  global order over every layer and both kinds then removes units until the share of weights is met,
  so the ratios adapt per layer; the removed channels' mean contribution W_:,j * mean(X_j) is added
  back as a bias of the output projection (bias compensation). Calibration is forward-only.

Deviation, shared by all: the statistics come from one forward pass of the dense model (FLAP does the
same; FLAP's wanda-sp feeds each layer the already pruned layers' outputs).

The calibration statistics (``collect_statistics``) are the same for every method; magnitude uses none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch
from torch import nn

from glue_sparse_tasks.console import progress
from glue_sparse_tasks.errors import UserInputError
from sparse_models.structured.units import LayerUnits, UnitPlan

__all__ = ["METHODS", "InputStatistics", "collect_statistics", "unit_scores", "select_uniform", "select_global",
           "one_shot_plan", "bias_compensation"]

METHODS = ("magnitude-sp", "wanda-sp", "flap")


@dataclass
class InputStatistics:
    """Per input channel of every ``o_proj`` and ``down_proj``: token count, sum and sum of squares (float64)."""

    count: dict[str, int]
    total: dict[str, torch.Tensor]
    squares: dict[str, torch.Tensor]

    def mean(self, name: str) -> torch.Tensor:
        return self.total[name] / self.count[name]

    def variance(self, name: str) -> torch.Tensor:
        """Unbiased sample variance over the calibration tokens."""
        n = self.count[name]
        return (self.squares[name] - self.total[name] ** 2 / n) / max(1, n - 1)

    def norm(self, name: str) -> torch.Tensor:
        return self.squares[name].sqrt()


@torch.inference_mode()
def collect_statistics(model: nn.Module, layers: list[LayerUnits], batches: Iterable[torch.Tensor]) -> InputStatistics:
    """Run ``batches`` of token ids through ``model`` (forward only) and gather the inputs' statistics of
    every layer's output projections."""
    stats = InputStatistics({}, {}, {})
    hooks = []

    def hook_for(name: str):
        def hook(module: nn.Module, args: tuple) -> None:
            x = args[0].detach().reshape(-1, args[0].shape[-1]).double()
            stats.count[name] = stats.count.get(name, 0) + x.shape[0]
            stats.total[name] = stats.total.get(name, 0) + x.sum(0)
            stats.squares[name] = stats.squares.get(name, 0) + (x * x).sum(0)
        return hook

    for unit in layers:
        for short in ("o_proj", "down_proj"):
            name = unit.module(short)
            hooks.append(model.get_submodule(name).register_forward_pre_hook(hook_for(name)))
    try:
        was_training = model.training
        model.eval()
        for ids in progress(batches, desc="calibration", unit="block"):
            model(input_ids=ids)
        model.train(was_training)
    finally:
        for h in hooks:
            h.remove()
    if not stats.count:
        raise UserInputError("calibration saw no tokens")
    return stats


def _per_head(values: torch.Tensor, unit: LayerUnits) -> torch.Tensor:
    return values.view(unit.heads, unit.head_dim).sum(dim=1)


@torch.no_grad()
def unit_scores(method: str, model: nn.Module, layers: list[LayerUnits],
                stats: InputStatistics | None) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(per layer, a score per query head), (per layer, a score per FFN channel): higher means keep.
    FLAP's are already standardised (comparable across layers and kinds)."""
    if method not in METHODS:
        raise UserInputError(f"unknown structured pruning method {method!r}; known: {', '.join(METHODS)}")
    if method != "magnitude-sp" and stats is None:
        raise UserInputError(f"{method} needs calibration statistics")
    head_scores, channel_scores = [], []
    for unit in layers:
        weight = {s: model.get_submodule(unit.module(s)).weight.detach().double() for s in ("o_proj", "down_proj")}
        o_name, down_name = unit.module("o_proj"), unit.module("down_proj")
        if method == "magnitude-sp":
            heads = _per_head(weight["o_proj"].norm(dim=0), unit)
            channels = weight["down_proj"].norm(dim=0)
        elif method == "wanda-sp":
            heads = _per_head(weight["o_proj"].abs().sum(0) * stats.norm(o_name), unit)
            channels = weight["down_proj"].abs().sum(0) * stats.norm(down_name)
        else:  # flap: fluctuation times squared column norm, standardised per layer over input channels
            attention = (stats.variance(o_name) * weight["o_proj"].pow(2).sum(0)) ** 2
            heads = _standardised(attention).view(unit.heads, unit.head_dim).mean(dim=1)
            channels = _standardised(stats.variance(down_name) * weight["down_proj"].pow(2).sum(0))
        head_scores.append(heads.float().cpu())
        channel_scores.append(channels.float().cpu())
    return head_scores, channel_scores


def _check_share(share: float) -> None:
    if not 0.0 < share < 1.0:
        raise UserInputError(f"removal share must be in (0, 1), got {share!r}")


def select_uniform(layers: list[LayerUnits], head_scores: list[torch.Tensor], channel_scores: list[torch.Tensor],
                   share: float) -> UnitPlan:
    """The same number of lowest-scoring heads and of channels removed in every layer, together as near
    to ``share`` of block-linear weights as whole units allow (heads: the nearest whole share of them;
    channels make up the rest)."""
    _check_share(share)
    plan = UnitPlan.dense(layers)
    n_heads = round(share * layers[0].heads)
    for i, scores in enumerate(head_scores):
        plan.heads[i][torch.argsort(scores, stable=True)[:n_heads]] = False
    left = share * plan.block_weights() - plan.removed_weights()
    per_layer = max(0, min(layers[0].channels, round(left / layers[0].channel_cost() / len(layers))))
    for i, scores in enumerate(channel_scores):
        plan.channels[i][torch.argsort(scores, stable=True)[:per_layer]] = False
    return plan


def _standardised(scores: torch.Tensor) -> torch.Tensor:
    """(s - mean) / std within one layer's channels (FLAP's per-layer, per-module standardisation)."""
    std = scores.std() if scores.numel() > 1 else torch.tensor(0.0)
    return (scores - scores.mean()) / (std if std > 0 else 1.0)


def select_global(layers: list[LayerUnits], head_scores: list[torch.Tensor], channel_scores: list[torch.Tensor],
                  share: float) -> UnitPlan:
    """One order over every layer's heads and channels (lowest score first; the scores must be comparable
    across layers and kinds), removed until ``share`` of block-linear weights is gone; of the two unit
    counts around the target, the nearer one is kept."""
    _check_share(share)
    entries = []  # (score, layer, kind, index)
    for i, unit in enumerate(layers):
        for kind, scores in (("head", head_scores[i]), ("channel", channel_scores[i])):
            entries += [(float(v), i, kind, j) for j, v in enumerate(scores.double().tolist())]
    entries.sort(key=lambda e: e[0])
    plan = UnitPlan.dense(layers)
    target = share * plan.block_weights()
    removed = previous = 0
    for _, i, kind, j in entries:
        unit = layers[i]
        if kind == "head":
            kv = j // unit.group
            plan.heads[i][j] = False
            group_gone = not bool(plan.heads[i][kv * unit.group:(kv + 1) * unit.group].any())
            step = unit.head_cost() + (unit.kv_cost() if group_gone else 0)
        else:
            plan.channels[i][j] = False
            step = unit.channel_cost()
        previous, removed = removed, removed + step
        if removed >= target:
            if removed - target > target - previous:  # the count just below is nearer: undo the last unit
                (plan.heads if kind == "head" else plan.channels)[i][j] = True
            break
    return plan


@torch.no_grad()
def bias_compensation(model: nn.Module, plan: UnitPlan, stats: InputStatistics) -> dict[str, torch.Tensor]:
    """FLAP's compensation: for each output projection, sum over its removed input channels j of
    W_:,j * mean(X_j), so the layer's expected output over the calibration tokens is unchanged."""
    out = {}
    for i, unit in enumerate(plan.layers):
        removed_cols = {"o_proj": ~plan.heads[i].repeat_interleave(unit.head_dim), "down_proj": ~plan.channels[i]}
        for short, gone in removed_cols.items():
            if not bool(gone.any()):
                continue
            name = unit.module(short)
            weight = model.get_submodule(name).weight.detach()
            mean = stats.mean(name).to(weight.device)
            out[name] = (weight.double()[:, gone.to(weight.device)] @ mean[gone.to(weight.device)]).to(weight.dtype)
    return out


def one_shot_plan(method: str, model: nn.Module, layers: list[LayerUnits], share: float,
                  stats: InputStatistics | None) -> UnitPlan:
    """The plan each one-shot baseline makes at ``share`` of block-linear weights (FLAP with its biases)."""
    heads, channels = unit_scores(method, model, layers, stats)
    if method == "flap":
        plan = select_global(layers, heads, channels, share)
        plan.bias = bias_compensation(model, plan, stats)
        return plan
    return select_uniform(layers, heads, channels, share)
