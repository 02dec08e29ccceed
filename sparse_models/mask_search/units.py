"""The units mask search removes in an encoder: whole attention heads and whole FFN channels.

A *head* is ``head_dim`` rows of the query, key and value matrices and the same ``head_dim`` columns of
the attention output; an *FFN channel* is one row of the FFN input matrix and the matching column of
its output. Their masks multiply what enters the two output matrices (the heads' context, the FFN
activations), as in Kwon et al. (2022), so a mask value folds into those columns and a 0 removes the
unit. Together the units of a layer are every weight of its six matrices: under the default sparse-gate
targets they partition the gated weights, which makes a removal share asked of the search the share
``parameter_accounting`` reports once the units' gates are closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from glue_sparse_tasks.errors import UserInputError
from sparse_models.architectures import ENCODER_LAYOUTS

__all__ = ["EncoderLayer", "encoder_layers", "output_columns", "unit_costs"]

@dataclass(frozen=True)
class EncoderLayer:
    """One encoder layer's six matrices (their module names) and its unit counts."""

    prefix: str
    names: tuple[str, ...]
    heads: int
    head_dim: int
    channels: int

    def module(self, index: int) -> str:
        return self.prefix + self.names[index]

    @property
    def query(self) -> str:
        """Its input is the attention sublayer's residual stream."""
        return self.module(0)

    @property
    def attention_output(self) -> str:
        """Its input is the heads' context, one ``head_dim`` slice per head."""
        return self.module(3)

    @property
    def ffn_input(self) -> str:
        """Its input is the FFN sublayer's residual stream."""
        return self.module(4)

    @property
    def ffn_output(self) -> str:
        """Its input is the FFN activations, one per channel."""
        return self.module(5)


def _linear(module: nn.Module) -> nn.Linear:
    """The linear layer itself, inside a sparse-gate wrapper or not."""
    return module.get_base_layer() if hasattr(module, "get_base_layer") else module


def output_columns(model: nn.Module, name: str) -> torch.Tensor:
    """The (out, in) weight of the output matrix ``name``, whose columns a mask value scales."""
    return _linear(model.get_submodule(name)).weight


def unit_costs(model: nn.Module, layer: EncoderLayer) -> tuple[int, int]:
    """(weights one head holds, weights one channel holds): its q/k/v rows and output columns, its FFN row
    and column."""
    q, k, v, o, fin, fout = (_linear(model.get_submodule(layer.module(i))) for i in range(6))
    head = layer.head_dim * (q.in_features + k.in_features + v.in_features + o.out_features)
    return head, fin.in_features + fout.out_features


def encoder_layers(model: nn.Module) -> list[EncoderLayer]:
    """Every layer of ``model`` (a classifier or the gated PEFT model around one), in depth order (ALBERT's
    one shared layer once); a one-line error for an architecture whose heads and channels this search does
    not know, naming those it does."""
    config: Any = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type not in ENCODER_LAYOUTS:
        raise UserInputError(f"mask search prunes heads and FFN channels of {', '.join(ENCODER_LAYOUTS)} encoders "
                             f"(six separate matrices per layer); this model is {model_type!r}")
    layout = ENCODER_LAYOUTS[model_type]
    names = layout.matrices
    heads = getattr(config, layout.heads_attribute)
    layers = []
    for name, _ in model.named_modules():
        if not name.endswith("." + names[0]):
            continue
        prefix = name[: -len(names[0])]
        o = _linear(model.get_submodule(prefix + names[3]))
        fin = _linear(model.get_submodule(prefix + names[4]))
        layers.append(EncoderLayer(prefix, names, heads, o.in_features // heads, fin.out_features))
    return layers
