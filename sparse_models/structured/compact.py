"""From a ``UnitPlan`` to a model: the masked dense model (removed units zeroed, for checking) and the
physically compacted ``SparsePrunedForCausalLM`` (narrower matrices, no index work)."""

from __future__ import annotations

import copy

import torch
from torch import nn

from sparse_models.pruned.modeling_sparse_pruned import SparsePrunedPreTrainedModel, wrap_pruned_records
from sparse_models.pruned.modeling_sparse_pruned import replace_module
from sparse_models.pruned.pruned_attention import set_kept_heads
from sparse_models.pruned.pruned_linear import PrunedLinear
from sparse_models.structured.units import ATTENTION, MLP, UnitPlan

__all__ = ["compact", "masked_copy", "kept_indices"]


def kept_indices(plan: UnitPlan, index: int, short: str, module: nn.Linear) -> tuple[torch.Tensor, torch.Tensor]:
    """(kept rows, kept columns) of one of layer ``index``'s seven matrices."""
    rows = plan.kept_rows(index)
    device = module.weight.device
    out = rows.get(short, torch.arange(module.out_features))
    cols = {"o_proj": rows["o_cols"], "down_proj": rows["down_cols"]}.get(short, torch.arange(module.in_features))
    return out.to(device), cols.to(device)


def _bias_with_compensation(plan: UnitPlan, name: str, module: nn.Linear) -> torch.Tensor | None:
    extra = plan.bias.get(name)
    if extra is None:
        return None if module.bias is None else module.bias.detach()
    base = torch.zeros_like(extra) if module.bias is None else module.bias.detach()
    return base + extra.to(base)


@torch.no_grad()
def masked_copy(model: nn.Module, plan: UnitPlan) -> nn.Module:
    """A copy of ``model`` with every removed unit's rows and columns zeroed and the compensation biases
    added: the same function as the compacted model, at full width (what tests compare against)."""
    masked = copy.deepcopy(model)
    for i, unit in enumerate(plan.layers):
        for short in (*ATTENTION, *MLP):
            name = unit.module(short)
            module = masked.get_submodule(name)
            rows, cols = kept_indices(plan, i, short, module)
            keep = torch.zeros_like(module.weight, dtype=torch.bool)
            keep[rows.unsqueeze(1), cols.unsqueeze(0)] = True
            module.weight.mul_(keep)
            if module.bias is not None:
                module.bias.mul_(keep.any(dim=1))
            bias = _bias_with_compensation(plan, name, module)
            if bias is not None and module.bias is None:
                module.bias = nn.Parameter(bias.clone())
            elif bias is not None:
                module.bias.copy_(bias)
    return masked


def _kv_for_query(plan: UnitPlan, index: int) -> list[int]:
    """Per kept query head, its key/value head's index among the kept key/value heads."""
    unit = plan.layers[index]
    kept_kv = torch.nonzero(plan.kv_heads(index)).flatten().tolist()
    rank = {kv: r for r, kv in enumerate(kept_kv)}
    return [rank[h // unit.group] for h in torch.nonzero(plan.heads[index]).flatten().tolist()]


@torch.no_grad()
def compact(model: nn.Module, plan: UnitPlan, trainable_parameters: int | None = None) -> SparsePrunedPreTrainedModel:
    """Remove the plan's units from ``model`` (changed in place) and wrap it as a ``SparsePruned*`` model.

    Every matrix is cut to its kept rows and columns once, here; at run time nothing gathers or
    scatters (``PrunedLinear`` without index work is a plain narrower linear). The records mark every
    block linear as a target (``gated``), so the accounting's share of gated weights is the share of
    decoder-block linear weights removed."""
    dense_parameters = sum(p.numel() for p in model.parameters())
    records, heads = {}, {}
    closed = {"closed_rows": 0, "total_rows": 0, "closed_cols": 0, "total_cols": 0}
    for i, unit in enumerate(plan.layers):
        for short in (*ATTENTION, *MLP):
            name = unit.module(short)
            module = model.get_submodule(name)
            rows, cols = kept_indices(plan, i, short, module)
            bias = _bias_with_compensation(plan, name, module)
            added = module.bias is None and bias is not None
            records[name] = {"out_features": module.out_features, "in_features": module.in_features,
                             "kept_out": len(rows), "kept_in": len(cols), "alive_out": len(rows), "alive_in": len(cols),
                             "gather_in": False, "scatter_out": False, "bias": bias is not None, "gated": True,
                             "added_bias": added}
            closed["closed_rows"] += module.out_features - len(rows)
            closed["total_rows"] += module.out_features
            closed["closed_cols"] += module.in_features - len(cols)
            closed["total_cols"] += module.in_features
            if len(rows) < module.out_features or len(cols) < module.in_features or name in plan.bias:
                layer = PrunedLinear.from_dense(module.weight.detach(), bias, cols, rows, False, False)
                replace_module(model, name, layer)
        if not bool(plan.heads[i].all()):
            heads[unit.attention] = _kv_for_query(plan, i)
    set_kept_heads(model, heads)
    return wrap_pruned_records(model, records, closed, dense_parameters, trainable_parameters, attention_heads=heads)
