"""The post-training pruning of Kwon et al. (2022) end to end, on a fine-tuned encoder: Fisher of the
head and channel masks, search under a removal share, rearrangement, least-squares mask tuning, and the
removed units handed to sparse gates so the same pruned classes and accounting as every other method
remove them. No weight takes a gradient step; the only changes to weights are the tuned mask values
folded into the output matrices' columns.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from glue_sparse_tasks.console import progress
from sparse_models.mask_search.fisher import mask_gradients
from sparse_models.mask_search.search import rearrange, search_counts
from sparse_models.mask_search.tuning import fold, tune_layer
from sparse_models.mask_search.units import EncoderLayer, encoder_layers, unit_costs
from sparse_models.modules import unwrap_gated_model
from sparse_models.removal import CLOSED_LOGIT, OPEN_LOGIT, gate_logits

__all__ = ["MaskSearchResult", "mask_search", "close_units", "unit_gates"]


@dataclass
class MaskSearchResult:
    """What the search removed (per layer), the share of the units' weights that is, the tuning's relative
    reconstruction errors per sublayer (before and after), and the seconds of each stage."""

    heads: list[list[int]]
    channels: list[list[int]]
    removed_weights: int
    unit_weights: int
    tuning: list[dict[str, float]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def removed_share(self) -> float:
        return self.removed_weights / self.unit_weights

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "removed_share": self.removed_share,
                "heads_removed": sum(map(len, self.heads)), "channels_removed": sum(map(len, self.channels))}


def _uniform_costs(model: nn.Module, layers: list[EncoderLayer]) -> tuple[int, int]:
    costs = {unit_costs(model, layer) for layer in layers}
    if len(costs) != 1:
        raise ValueError(f"mask search needs layers of one shape; these hold {sorted(costs)} weights per head/channel")
    return costs.pop()


def _zero(model: nn.Module, layers: list[EncoderLayer], plan_heads: list[list[int]],
          plan_channels: list[list[int]]) -> list[dict[str, float]]:
    """Mask the removed units (their output columns set to 0); no tuning, so no report."""
    for layer, heads, channels in zip(layers, plan_heads, plan_channels):
        fold(model, layer.attention_output, dict.fromkeys(heads, 0.0), layer.head_dim)
        fold(model, layer.ffn_output, dict.fromkeys(channels, 0.0), 1)
    return []


def _tune(model: nn.Module, layers: list[EncoderLayer], plan_heads: list[list[int]], plan_channels: list[list[int]],
          batches: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Zero the removed units, then refit the kept ones layer by layer (attention, then FFN)."""
    teacher = copy.deepcopy(model).eval()
    _zero(model, layers, plan_heads, plan_channels)
    report: list[dict[str, float]] = []
    for index, (layer, heads, channels) in progress(list(enumerate(zip(layers, plan_heads, plan_channels))),
                                                    desc="mask search: tuning", unit="layer"):
        for attention, removed, count, name, width in ((True, heads, layer.heads, layer.attention_output,
                                                        layer.head_dim),
                                                       (False, channels, layer.channels, layer.ffn_output, 1)):
            kept = [u for u in range(count) if u not in set(removed)]
            values, before, after = tune_layer(model, teacher, layer, attention, kept, batches)
            fold(model, name, dict(zip(kept, values.tolist())), width)
            report.append({"layer": index, "sublayer": "attention" if attention else "ffn", "error_before": before,
                           "error_after": after})
    return report


def mask_search(model: nn.Module, batches: list[dict[str, Any]], share: float, tune: bool = True,
                apply: bool = True) -> MaskSearchResult:
    """Choose the heads and channels of ``model`` (a fine-tuned classifier, or the sparse-gated model around
    one with every gate open; changed in place) whose removal
    is ``share`` of their weights (the nearest a channel allows), from the labelled ``batches``; with
    ``tune`` refit the kept units' masks on the same batches (labels unused there) and fold them in.
    ``apply=False`` only chooses: no weight changes (a gate method that starts from the choice)."""
    started = time.perf_counter()
    model = unwrap_gated_model(model)  # the classifier inside sparse gates (all open), or the classifier
    layers = encoder_layers(model)
    head_cost, channel_cost = _uniform_costs(model, layers)
    total = sum(layer.heads * head_cost + layer.channels * channel_cost for layer in layers)
    gradients = mask_gradients(model, layers, batches)
    seconds = {"fisher": time.perf_counter() - started}
    plan = search_counts(gradients.head_importance(), gradients.channel_importance(), head_cost, channel_cost,
                         round(share * total))
    heads = [rearrange(g, removed) for g, removed in zip(gradients.heads, plan.heads)]
    channels = [rearrange(g, removed) for g, removed in zip(gradients.channels, plan.channels)]
    seconds["search"] = time.perf_counter() - started - seconds["fisher"]
    with torch.no_grad():
        report = [] if not apply else _tune(model, layers, heads, channels, batches) if tune else _zero(
            model, layers, heads, channels)
    seconds["tuning"] = time.perf_counter() - started - seconds["fisher"] - seconds["search"]
    return MaskSearchResult(heads, channels, plan.removed_weights, total, report, seconds)


def unit_gates(gated: nn.Module, heads: list[list[int]], channels: list[list[int]]) -> dict[str, torch.Tensor]:
    """The gates (keyed as ``gate_logits``: ``"<module>.row"``/``".col"`` -> indices) that remove the given heads
    and FFN channels of each layer: their q/k/v and FFN-input rows, their output columns."""
    out: dict[str, list[int]] = {}
    for layer, layer_heads, layer_channels in zip(encoder_layers(unwrap_gated_model(gated)), heads, channels):
        dims = [h * layer.head_dim + i for h in layer_heads for i in range(layer.head_dim)]
        for index in range(3):
            out[f"{layer.module(index)}.row"] = dims
        out[f"{layer.attention_output}.col"] = dims
        out[f"{layer.ffn_input}.row"] = list(layer_channels)
        out[f"{layer.ffn_output}.col"] = list(layer_channels)
    return {key: torch.tensor(indices, dtype=torch.long) for key, indices in out.items() if indices}


@torch.no_grad()
def close_units(gated: nn.Module, result: MaskSearchResult, closed: float = CLOSED_LOGIT,
                opened: float | None = OPEN_LOGIT) -> None:
    """Close the gates of every removed unit (its q/k/v and FFN-input rows, its output columns) and open
    every other gate, in ``gated``: the sparse-gated model wrapped around the searched classifier. ``closed``
    and ``opened`` are the logits they get (``opened=None``: other gates keep theirs)."""
    logits = gate_logits(gated)  # named as the units' layers are
    for parameter in logits.values():
        if opened is not None:
            parameter.fill_(opened)
    for key, indices in unit_gates(gated, result.heads, result.channels).items():
        logits[key][indices.to(logits[key].device)] = closed
