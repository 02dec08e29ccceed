"""Removal on request: close the lowest-ranked gates until a stated share of gated weights is gone.

The FineGates regulariser says nothing about how many weights end up removed (it pulls the mean
P(open), which gates can satisfy while all staying fractional). Here the removal is made exact:
gates are ranked by a score (accumulated Taylor importance or the logits while training, weight norms
for the magnitude baseline),
and the smallest number of lowest-ranked gates is closed whose removal, *as ``parameter_accounting``
reports it* (pruning chains included), reaches the requested share. Closed gates get a logit deep in
the clamp's zero region, and at the end open ones one deep in its one region, so evaluation gates are
exactly 0 or 1 and training noise (std 0.1) cannot move them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from glue_sparse_tasks.method_defaults import REMOVAL_GATE_TRAVEL
from sparse_models import gates
from sparse_models.accounting import parameter_accounting
from sparse_models.modules import unwrap_gated_model
from sparse_models.sparse_gates.layer import SparseGatesLayer

__all__ = [
    "CLOSED_LOGIT",
    "OPEN_LOGIT",
    "RemovalSchedule",
    "gate_logits",
    "close_lowest",
    "scheduled_closed",
    "freeze_gates",
    "magnitude_scores",
    "random_scores",
    "importance_scores",
    "flush_importance",
    "track_importance",
    "importance_state",
    "all_ranks_importance",
    "gate_fingerprint",
    "load_importance_state",
    "removal_gate_learning_rate",
]

#: tanh(-3) + 0.5 = -0.495: the evaluation gate is 0, and noise of std 0.1 opens it with p ~ 4e-7.
CLOSED_LOGIT = -3.0
#: tanh(3) + 0.5 = 1.495: the evaluation gate is 1 with the same margin.
OPEN_LOGIT = 3.0


def gate_logits(model: nn.Module, adapter: str | None = None) -> dict[str, nn.Parameter]:
    """``"<module>.row"`` / ``"<module>.col"`` -> gate logit parameter of one adapter, in module order."""
    inner = unwrap_gated_model(model)
    out: dict[str, nn.Parameter] = {}
    for name, layer in inner.named_modules():
        if not isinstance(layer, SparseGatesLayer):
            continue
        key = adapter or layer.active_adapters[0]
        if key in layer.sparse_gates_row:
            out[f"{name}.row"] = layer.sparse_gates_row[key]
            out[f"{name}.col"] = layer.sparse_gates_col[key]
    if not out:
        raise ValueError("the model has no sparse-gate layers")
    return out


@torch.no_grad()
def close_lowest(
    model: nn.Module,
    share: float,
    scores: dict[str, torch.Tensor] | None = None,
    snap_open: bool = False,
    adapter: str | None = None,
    closed: dict[str, torch.Tensor] | None = None,
) -> float:
    """Close the fewest lowest-scoring gates whose removal reaches ``share`` of gated weights.

    ``scores`` maps the keys of :func:`gate_logits` to one score per gate (default: the logits, so
    already-closed gates stay closed and the ramp only grows). Of the two counts around the target,
    the one whose removal is nearer is kept. With ``snap_open`` every other gate is set fully open.
    ``closed``: the gates a schedule closed before (they stay closed); without it, every gate whose
    evaluation value is 0. A schedule passes it so that gates training pushed shut on their own count
    against the share instead of adding to it: they rank by their score like any other, and the ones not
    chosen are reopened by ``snap_open``, so the final share is the one asked at any gate learning rate.
    Returns the removed share of gated weights now reported by ``parameter_accounting``.
    """
    params = gate_logits(model, adapter)
    scores = {k: p.detach().clone() for k, p in params.items()} if scores is None else scores
    originals = {k: p.detach().clone() for k, p in params.items()}
    was_closed = ({k: closed[k].to(p.device) for k, p in originals.items()} if closed is not None
                  else {k: gates.eval_gate_values(p) == 0 for k, p in originals.items()})
    # a gate closed earlier ranks first whatever its score, so the closed set only grows
    flat = torch.cat([torch.where(was_closed[k], float("-inf"), scores[k].float()).flatten().cpu() for k in params])
    order = torch.argsort(flat, stable=True)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(len(order))
    bounds, start = {}, 0
    for key, p in params.items():
        bounds[key] = (start, start + p.numel())
        start += p.numel()

    def apply(k: int) -> float:
        for key, p in params.items():
            lo, hi = bounds[key]
            closed = (rank[lo:hi] < k).to(p.device).view_as(p)
            rest = torch.where(was_closed[key], CLOSED_LOGIT, OPEN_LOGIT).to(p) if snap_open else originals[key]
            p.copy_(torch.where(closed, torch.full_like(p, CLOSED_LOGIT), rest))
        return parameter_accounting(model).removed_share_of_gated

    lo, hi = 0, len(flat)  # removal(lo) < share <= removal(hi), searched over the count of closed gates
    most = apply(hi)
    if most < share:
        raise ValueError(f"closing every gate removes {most:.3f} of gated weights, less than {share}")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if apply(mid) >= share:
            hi = mid
        else:
            lo = mid
    below, above = apply(lo), apply(hi)  # each apply plans the whole model: no more than needed
    return above if above - share <= share - below else apply(lo)


def scheduled_closed(model: nn.Module, before: dict[str, torch.Tensor] | None = None,
                     adapter: str | None = None) -> dict[str, torch.Tensor]:
    """The gates a schedule has closed, after a :func:`close_lowest`: those closed before and those it just
    set to ``CLOSED_LOGIT`` (a gate training pushed shut holds another logit)."""
    out = {k: p.detach() == CLOSED_LOGIT for k, p in gate_logits(model, adapter).items()}
    return out if before is None else {k: out[k] | before[k].to(out[k].device) for k in out}


def freeze_gates(model: nn.Module, adapter: str | None = None) -> None:
    """Stop training the gate logits (the removal is final); biases, head and LoRA keep training."""
    for p in gate_logits(model, adapter).values():
        p.requires_grad_(False)


def track_importance(model: nn.Module, on: bool = True) -> None:
    """Start (or stop) accumulating each gate's Taylor importance |dL/dz * z| in training steps."""
    for layer in unwrap_gated_model(model).modules():
        if isinstance(layer, SparseGatesLayer):
            layer.track_importance = on


def flush_importance(model: nn.Module) -> None:
    """Add this optimiser step's |sum dL/dz * z| to every gate's importance sums. The signed terms are
    summed over the step's micro-batches and averaged over data-parallel ranks (one all-reduce) before
    the absolute value, so the sums are those of the global batch however it was split: N processes,
    or gradient accumulation, rank gates as one process with the whole batch does."""
    import torch.distributed as dist

    items = [(layer, adapter, side) for _, layer in unwrap_gated_model(model).named_modules()
             if isinstance(layer, SparseGatesLayer) for adapter in sorted(layer.pending_importance)
             for side in sorted(layer.pending_importance[adapter])]
    if not items:
        return
    flat = torch.cat([layer.pending_importance[a][s].reshape(-1) for layer, a, s in items])
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(flat)  # same item order on every rank: module order, then sorted keys
        flat /= dist.get_world_size()  # ranks' losses are scaled so that DDP's mean is the global gradient
    offset = 0
    for layer, adapter, side in items:
        term = layer.pending_importance[adapter][side]
        value = flat[offset:offset + term.numel()].view_as(term).abs()
        offset += term.numel()
        sums = layer.importance.setdefault(adapter, {})
        sums[side] = value if side not in sums else sums[side] + value
    for layer, _, _ in items:
        layer.pending_importance = {}


def importance_scores(model: nn.Module, adapter: str | None = None) -> dict[str, torch.Tensor] | None:
    """The accumulated Taylor importance per gate, keyed like :func:`gate_logits` (a closed gate adds
    nothing more, z = 0; :func:`close_lowest` keeps it first in the ranking whatever its sum). None
    before any training step was recorded."""
    inner = unwrap_gated_model(model)
    out: dict[str, torch.Tensor] = {}
    for name, layer in inner.named_modules():
        if not isinstance(layer, SparseGatesLayer):
            continue
        sums = layer.importance.get(adapter or layer.active_adapters[0], {})
        if "row" not in sums or "col" not in sums:
            return None
        out[f"{name}.row"], out[f"{name}.col"] = sums["row"], sums["col"]
    return out or None


def all_ranks_importance(scores: dict[str, torch.Tensor] | None) -> dict[str, torch.Tensor] | None:
    """Under data parallelism each rank sums |dL/dz * z| over its own batches: rank on the sum over all
    ranks (a reduced copy; the local sums stay local), so every rank closes the same gates."""
    import torch.distributed as dist

    if scores is None or not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return scores
    reduced = {k: v.clone() for k, v in scores.items()}
    for value in reduced.values():  # same key order on every rank (module order)
        dist.all_reduce(value)
    return reduced


def gate_fingerprint(model: nn.Module, adapter: str | None = None) -> str | None:
    """sha256 of every gate logit, to show that data-parallel ranks hold identical gates."""
    import hashlib

    try:
        params = gate_logits(model, adapter)
    except ValueError:
        return None
    digest = hashlib.sha256()
    for key, p in params.items():
        digest.update(key.encode())
        digest.update(p.detach().float().cpu().numpy().tobytes())
    return digest.hexdigest()


def importance_state(model: nn.Module, adapter: str | None = None) -> dict[str, torch.Tensor]:
    """The importance sums as a flat tensor dict (``"<module>.row"``...), for a checkpoint."""
    return {k: v.detach().cpu().contiguous() for k, v in (importance_scores(model, adapter) or {}).items()}


def load_importance_state(model: nn.Module, state: dict[str, torch.Tensor], adapter: str | None = None) -> None:
    """Put saved importance sums back, so a resumed run ranks gates as the uninterrupted one would."""
    for name, layer in unwrap_gated_model(model).named_modules():
        if isinstance(layer, SparseGatesLayer) and f"{name}.row" in state:
            device = layer.get_base_layer().weight.device
            layer.importance[adapter or layer.active_adapters[0]] = {
                "row": state[f"{name}.row"].to(device), "col": state[f"{name}.col"].to(device)}


@torch.no_grad()
def magnitude_scores(model: nn.Module, adapter: str | None = None) -> dict[str, torch.Tensor]:
    """Structured-magnitude scores: each row's and column's L2 norm in its (out, in) weight, divided by
    the mean norm of that matrix's rows (or columns), so one global ranking compares matrices of
    different scales. Used to close gates for the magnitude-pruning baseline."""
    inner = unwrap_gated_model(model)
    out: dict[str, torch.Tensor] = {}
    for name, layer in inner.named_modules():
        if not isinstance(layer, SparseGatesLayer):
            continue
        weight = layer.get_base_layer().weight.detach().float()
        w = weight.T if layer.fan_in_fan_out else weight
        rows, cols = w.norm(dim=1), w.norm(dim=0)
        out[f"{name}.row"] = rows / rows.mean().clamp_min(1e-12)
        out[f"{name}.col"] = cols / cols.mean().clamp_min(1e-12)
    return out


def random_scores(model: nn.Module, seed: int, adapter: str | None = None) -> dict[str, torch.Tensor]:
    """A uniform random ranking fixed by ``seed`` (so every closing event, every data-parallel rank and a
    resumed run rank alike): the control for the learned rankings, since it spreads the closings evenly
    over every matrix and uses no signal."""
    generator = torch.Generator().manual_seed(seed)
    return {key: torch.rand(p.shape, generator=generator) for key, p in gate_logits(model, adapter).items()}




@dataclass(frozen=True)
class RemovalSchedule:
    """When and how much to close along a cubic ramp: ``events`` closings, the last at ``end`` of
    ``total_steps``, where the removal reaches ``target`` and the gates are frozen at 0/1."""

    target: float
    total_steps: int
    end: float = 0.8
    events: int = 10

    @property
    def final_step(self) -> int:
        return max(1, min(self.total_steps, round(self.end * self.total_steps)))

    def event_steps(self) -> list[int]:
        """Optimiser steps (1-based, after the step) at which the closed set grows; the last is final."""
        n = min(self.events, self.final_step)
        return sorted({max(1, round(self.final_step * (i + 1) / n)) for i in range(n)})

    def share_at(self, step: int) -> float:
        """Removed share asked for after ``step``: the cubic ramp, exactly ``target`` from the final step."""
        return self.target if step >= self.final_step else gates.cubic_ramp(step / self.final_step, self.target)


def removal_gate_learning_rate(schedule: RemovalSchedule) -> float:
    """The gate logits' own learning rate under the removal recipe (fine-tuning, post-training and
    pre-training alike): ``REMOVAL_GATE_TRAVEL`` over the removal steps, so a gate can cross from open to
    closed within the budget whatever the budget is."""
    return REMOVAL_GATE_TRAVEL / schedule.final_step
