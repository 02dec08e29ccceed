"""Mask tuning by least squares (Kwon et al. 2022, Sec. 4.4): layer by layer, the kept heads' and channels'
mask values are refitted so the pruned sublayer reproduces the dense one on unlabelled examples.

A sublayer (attention, then FFN) adds ``sum_u m_u * c_u(x)`` plus the output bias to its residual input
before the layer norm, where ``c_u`` is unit ``u``'s contribution through the output matrix. The target
is the dense model's pre-norm sum on the same examples; the pruned model's inputs already carry every
earlier layer's removal and tuning, so each layer also corrects the drift it receives. The fit is linear
in ``m``: its normal equations are summed over the examples' real tokens, solved with a small ridge, and
kept only where they lower the reconstruction error; the values then fold into the output matrix's
columns (a removed unit's columns become 0).
"""

from __future__ import annotations

from typing import Any, Iterable

import torch
from torch import nn

from sparse_models.mask_search.units import EncoderLayer, output_columns

__all__ = ["fold", "tune_layer"]

#: ridge on the normal equations, relative to their mean diagonal
RIDGE = 1e-4


class _Captured(Exception):
    """Stops a forward pass once the sublayer being tuned has been seen."""


def _capture(model: nn.Module, residual_name: str, output_name: str, batch: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    """(the residual stream entering the sublayer, the input of its output matrix) on ``batch``."""
    seen: dict[str, torch.Tensor] = {}

    def keep_residual(_, args):
        seen.setdefault("residual", args[0])

    def keep_and_stop(_, args):
        seen["inner"] = args[0]
        raise _Captured

    handles = [model.get_submodule(residual_name).register_forward_pre_hook(keep_residual),
               model.get_submodule(output_name).register_forward_pre_hook(keep_and_stop)]
    try:
        model(**{k: v for k, v in batch.items() if k != "labels"})
    except _Captured:
        pass
    finally:
        for handle in handles:
            handle.remove()
    return seen["residual"], seen["inner"]


def _columns(units: list[int], width: int) -> torch.Tensor:
    return torch.tensor([u * width + i for u in units for i in range(width)], dtype=torch.long)


@torch.no_grad()
def tune_layer(student: nn.Module, teacher: nn.Module, layer: EncoderLayer, attention: bool, kept: list[int],
               batches: Iterable[dict[str, Any]]) -> tuple[torch.Tensor, float, float]:
    """(mask values of ``kept`` units, relative error with all ones, with the values) of one sublayer.

    Unit ``u``'s contribution is ``X_u W_u^T`` (its ``width`` input columns ``X_u`` through its columns
    ``W_u`` of the output matrix), so the normal equations are block sums of ``(X^T X) * (W^T W)``
    (element-wise) and of ``X * (y W)``: only ``X^T X`` is summed over tokens, never a tensor per unit.
    """
    residual_name = layer.query if attention else layer.ffn_input
    output_name = layer.attention_output if attention else layer.ffn_output
    width = layer.head_dim if attention else 1
    columns = _columns(kept, width)
    weight = output_columns(student, output_name).detach().double()[:, columns]
    dense_weight = output_columns(teacher, output_name).detach().double()
    inputs = torch.zeros(len(columns), len(columns), dtype=torch.float64)
    cross = torch.zeros(len(columns), dtype=torch.float64)
    energy = 0.0
    for batch in batches:
        tokens = batch["attention_mask"].bool().flatten()
        dense_residual, dense_inner = (t.flatten(0, 1)[tokens].double()
                                       for t in _capture(teacher, residual_name, output_name, batch))
        residual, inner = (t.flatten(0, 1)[tokens].double()
                           for t in _capture(student, residual_name, output_name, batch))
        target = dense_inner @ dense_weight.T + dense_residual - residual  # the output bias is the same on both
        kept_inner = inner[:, columns]
        inputs += kept_inner.T @ kept_inner
        cross += (kept_inner * (target @ weight)).sum(0)
        energy += float((target * target).sum())
    units = len(kept)
    gram = (inputs * (weight.T @ weight)).reshape(units, width, units, width).sum((1, 3))
    moment = cross.reshape(units, width).sum(1)
    ones = torch.ones(units, dtype=torch.float64)

    def error(m: torch.Tensor) -> float:
        return float(m @ gram @ m - 2 * m @ moment + energy) / max(energy, 1e-30)

    if units == 0:
        return ones, error(ones), error(ones)
    ridge = RIDGE * float(gram.diagonal().mean())
    values, info = torch.linalg.solve_ex(gram + ridge * torch.eye(units, dtype=torch.float64), moment)
    before, after = error(ones), error(values)
    if int(info) != 0 or not torch.isfinite(values).all() or after >= before:
        return ones, before, before
    return values, before, after


@torch.no_grad()
def fold(model: nn.Module, name: str, values: dict[int, float], width: int) -> None:
    """Scale unit ``u``'s ``width`` columns of the output matrix ``name`` by ``values[u]`` (0 removes it)."""
    weight = output_columns(model, name)
    for unit, value in values.items():
        weight[:, unit * width:(unit + 1) * width] *= value
