"""Stochastic gates on whole units: one gate per query head (on ``head_dim`` input columns of ``o_proj``)
and one per FFN channel (on an input column of ``down_proj``), so every closed gate is a unit that
compaction removes whole (its q rows and o columns; its gate/up rows and down column).

The gate maths is FineGates' (``sparse_models.gates``): logit -> tanh -> clamp(mu + noise + 0.5, 0, 1).
Unlike the row/column gates of the PEFT method, no gate sits on the residual side, so removal needs no
index work. The FineGates reference also adds a trainable random bias to each gated layer; these gates
add none (a listed deviation: a bias would be a weight change the one-shot baselines do not get).
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch import nn

from sparse_models import gates
from sparse_models.removal import CLOSED_LOGIT, OPEN_LOGIT
from sparse_models.structured.scores import select_global
from sparse_models.structured.units import LayerUnits, UnitPlan

__all__ = ["UnitGatedLinear", "add_unit_gates", "unit_gated_modules", "gate_plan", "close_units", "remove_unit_gates",
           "gates_disabled", "track_unit_importance", "unit_importance", "EDGE_INIT"]

#: Logits just past the clamp's edge (tanh(0.6) + 0.5 = 1.04): the model is unchanged at step 0, but
#: training noise already lets the loss reach every gate (the removal recipe's init).
EDGE_INIT = (0.6, 0.01)


class UnitGatedLinear(nn.Module):
    """``base(x * repeat(gate, group))``: ``units`` gates, each on ``group`` consecutive input columns."""

    def __init__(self, base: nn.Linear, units: int, group: int, init: tuple[float, float] = EDGE_INIT,
                 noise_std: float = 0.1) -> None:
        super().__init__()
        if units * group != base.in_features:
            raise ValueError(f"{units} units of {group} columns do not cover {base.in_features} inputs")
        self.base, self.group, self.noise_std = base, group, noise_std
        self.unit_gate_logits = nn.Parameter(gates.init_gate_logits(units, *init).to(base.weight.device))
        self.enabled = True
        self.track_importance = False
        self.importance: torch.Tensor | None = None  # running sum of |dL/dz * z| per gate while tracking

    def gate_values(self, training: bool | None = None) -> torch.Tensor:
        return gates.gate_values(self.unit_gate_logits, self.noise_std, self.training if training is None else training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return self.base(x)
        z = self.gate_values()
        if self.track_importance and z.requires_grad and torch.is_grad_enabled():
            value = z.detach()

            def record(grad: torch.Tensor) -> None:
                term = (grad.detach() * value).abs().float()
                self.importance = term if self.importance is None else self.importance + term

            z.register_hook(record)
        return self.base(x * z.repeat_interleave(self.group).to(x.dtype))


def add_unit_gates(model: nn.Module, layers: list[LayerUnits], init: tuple[float, float] = EDGE_INIT,
                   noise_std: float = 0.1) -> nn.Module:
    """Freeze ``model`` and gate every layer's heads and FFN channels (in place); only gates train."""
    for p in model.parameters():
        p.requires_grad_(False)
    for unit in layers:
        for short, units, group in (("o_proj", unit.heads, unit.head_dim), ("down_proj", unit.channels, 1)):
            name = unit.module(short)
            parent, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent), child,
                    UnitGatedLinear(model.get_submodule(name), units, group, init, noise_std))
    return model


def unit_gated_modules(model: nn.Module) -> dict[str, UnitGatedLinear]:
    return {n: m for n, m in model.named_modules() if isinstance(m, UnitGatedLinear)}


def _gate_of(model: nn.Module, unit: LayerUnits, short: str) -> UnitGatedLinear:
    module = model.get_submodule(unit.module(short))
    if not isinstance(module, UnitGatedLinear):
        raise ValueError(f"{unit.module(short)} carries no unit gates")
    return module


@torch.no_grad()
def gate_plan(model: nn.Module, layers: list[LayerUnits]) -> UnitPlan:
    """The units whose evaluation gate is exactly 0, as a ``UnitPlan`` (what compaction removes)."""
    plan = UnitPlan.dense(layers)
    for i, unit in enumerate(layers):
        plan.heads[i] = (_gate_of(model, unit, "o_proj").gate_values(False) > 0).cpu()
        plan.channels[i] = (_gate_of(model, unit, "down_proj").gate_values(False) > 0).cpu()
    return plan


@torch.no_grad()
def close_units(model: nn.Module, layers: list[LayerUnits], share: float,
                scores: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None, snap_open: bool = False) -> float:
    """Close the lowest-scoring units until ``share`` of block-linear weights is removed; units closed
    before stay closed (they rank first). Scores (higher: keep; default the logits) are compared as they
    are, heads against channels across every layer: dividing a head's Taylor importance by the 43x more
    weights it holds removed most heads of most layers and read C4 perplexity 164.6 at 20% removed,
    against 66.4 for the same importance sums compared raw (SmolLM2-135M; see
    benchmarks/results/posttrain_structured_smollm2/README.md). With ``snap_open`` every other gate is
    set fully open. Returns the removed share."""
    closed_before = gate_plan(model, layers)
    heads, channels = [], []
    for i, unit in enumerate(layers):
        for short, mask, out in (("o_proj", closed_before.heads[i], heads), ("down_proj", closed_before.channels[i],
                                                                              channels)):
            gate = _gate_of(model, unit, short)
            raw = (gate.unit_gate_logits.detach() if scores is None else
                   (scores[0] if short == "o_proj" else scores[1])[i]).float().cpu()
            out.append(torch.where(mask, raw, torch.tensor(float("-inf"))))
    plan = select_global(layers, heads, channels, share)
    for i, unit in enumerate(layers):
        for short, keep in (("o_proj", plan.heads[i]), ("down_proj", plan.channels[i])):
            logits = _gate_of(model, unit, short).unit_gate_logits
            keep = keep.to(logits.device)
            rest = torch.full_like(logits, OPEN_LOGIT) if snap_open else logits.detach()
            logits.copy_(torch.where(keep, rest, torch.full_like(logits, CLOSED_LOGIT)))
    return plan.removed_share()


def track_unit_importance(model: nn.Module, on: bool = True) -> None:
    for module in unit_gated_modules(model).values():
        module.track_importance = on


def unit_importance(model: nn.Module, layers: list[LayerUnits]) -> tuple[list[torch.Tensor], list[torch.Tensor]] | None:
    """The accumulated Taylor importance of every head and channel gate, or None before any was recorded."""
    heads, channels = [], []
    for unit in layers:
        for short, out in (("o_proj", heads), ("down_proj", channels)):
            importance = _gate_of(model, unit, short).importance
            if importance is None:
                return None
            out.append(importance)
    return heads, channels


@contextlib.contextmanager
def gates_disabled(model: nn.Module) -> Iterator[None]:
    """The frozen dense model, gates bypassed: the distillation teacher, without a second copy in memory."""
    modules = unit_gated_modules(model).values()
    for m in modules:
        m.enabled = False
    try:
        yield
    finally:
        for m in modules:
            m.enabled = True


@torch.no_grad()
def remove_unit_gates(model: nn.Module) -> nn.Module:
    """Fold the evaluation gates into the wrapped layers' columns and put the plain layers back (in place)."""
    for name, module in unit_gated_modules(model).items():
        base = module.base
        z = module.gate_values(False).repeat_interleave(module.group).to(base.weight)
        base.weight.mul_(z[None, :])
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent), child, base)
    return model
