"""Gaussian stochastic gates (FineGates): the one place their maths lives.

A gate has a free parameter ``logit``; ``mu = tanh(logit)``. Training samples
``z = clamp(mu + eps + 0.5, 0, 1)`` with ``eps ~ N(0, noise_std^2)``; evaluation uses the
deterministic ``clamp(mu + 0.5, 0, 1)``. A row or column is removable only when its evaluation gate
is exactly 0. See ``docs/finegates-reference.md``.

Two regularisers live here. ``keep_penalty`` is the FineGates reference term (its value and gradient
equal ``jsvir/FineGates`` ``SparseLayer.sparsity_loss``). ``open_pressure`` is the removal recipe's
steady pull: it only has to rank gates, because the removal itself is made exact by
``sparse_models.removal``.
"""

from __future__ import annotations

import math

import torch

from glue_sparse_tasks.method_defaults import REFERENCE_SIGMA

__all__ = [
    "init_gate_logits",
    "gate_mean",
    "gate_values",
    "eval_gate_values",
    "open_probability",
    "keep_penalty",
    "open_pressure",
    "cubic_ramp",
]



def init_gate_logits(size: int, mean: float = 1.0, std: float = 0.1,
                     generator: torch.Generator | None = None) -> torch.Tensor:
    """Logits drawn from N(mean, std): with the defaults every gate starts fully open (tanh(1)+0.5 > 1)."""
    return torch.randn(size, generator=generator) * std + mean


def gate_mean(logit: torch.Tensor) -> torch.Tensor:
    """The tanh parameterisation keeps mu in (-1, 1), so an open or closed gate stays reachable."""
    return torch.tanh(logit)


def eval_gate_values(logit: torch.Tensor) -> torch.Tensor:
    """Deterministic evaluation gates in [0, 1]; exactly 0 means the row/column can be removed."""
    return torch.clamp(gate_mean(logit) + 0.5, 0.0, 1.0)


def gate_values(logit: torch.Tensor, noise_std: float, training: bool) -> torch.Tensor:
    """Gaussian relaxation in training (one noise draw per gate per forward), deterministic otherwise."""
    if not training:
        return eval_gate_values(logit)
    noise = torch.randn_like(logit) * noise_std
    return torch.clamp(gate_mean(logit) + noise + 0.5, 0.0, 1.0)


def open_probability(logit: torch.Tensor, sigma: float) -> torch.Tensor:
    """P(z > 0) = Phi((mu + 0.5) / sigma): the differentiable surrogate of 'this gate stays open'."""
    return 0.5 * (1.0 + torch.erf((gate_mean(logit) + 0.5) / (sigma * math.sqrt(2.0))))


def keep_penalty(row_logit: torch.Tensor, col_logit: torch.Tensor, keep: float, sigma: float) -> torch.Tensor:
    """One layer's pull toward ``keep = 1 - target_sparsity``: the mean of |mean P(row open) - keep| and
    |mean P(col open) - keep| (the reference averages the two terms; it does not sum them)."""
    rows = (open_probability(row_logit, sigma).mean() - keep).abs()
    cols = (open_probability(col_logit, sigma).mean() - keep).abs()
    return (rows + cols) / 2


def open_pressure(row_logit: torch.Tensor, col_logit: torch.Tensor, sigma: float) -> torch.Tensor:
    """One layer's mean P(open) over rows and columns: a steady downward pull on every gate, so that
    gates the task does not defend drift below those it does, and the ranking says which to close."""
    return (open_probability(row_logit, sigma).mean() + open_probability(col_logit, sigma).mean()) / 2


def cubic_ramp(progress: float, final: float) -> float:
    """``final * (1 - (1 - progress)^3)``, progress clamped to [0, 1]: the gradual-pruning schedule of
    Zhu & Gupta (2017), used by movement pruning and CoFi. Removes fast while the model is far from
    the target and slowly near it, so the last removals meet a model that has adapted."""
    p = min(max(progress, 0.0), 1.0)
    return final * (1.0 - (1.0 - p) ** 3)
