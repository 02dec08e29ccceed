"""Gaussian stochastic gates (FineGates): the one place their maths lives.

A gate has a free parameter ``logit``; ``mu = tanh(logit)``. Training samples
``z = clamp(mu + eps + 0.5, 0, 1)`` with ``eps ~ N(0, noise_std^2)``; evaluation uses the
deterministic ``clamp(mu + 0.5, 0, 1)``. A row or column is removable only when its evaluation gate
is exactly 0. See ``../shared/notes/protocols.md`` (FineGates).
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "init_gate_logits",
    "gate_mean",
    "gate_values",
    "eval_gate_values",
    "open_probability",
    "keep_penalty",
]


def init_gate_logits(size: int, mean: float = 1.0, std: float = 0.1, generator: torch.Generator | None = None) -> torch.Tensor:
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
    """One layer's pull toward ``keep = 1 - target_sparsity``: |mean P(row open) - keep| + the same for columns."""
    rows = (open_probability(row_logit, sigma).mean() - keep).abs()
    cols = (open_probability(col_logit, sigma).mean() - keep).abs()
    return rows + cols
