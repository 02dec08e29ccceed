"""Row-pruned output layers that add their kept rows straight into the residual stream.

In BERT-family blocks the attention output and the FFN output go back to the residual width (their
closed rows removed need a scatter into zeros) and are then added to the residual. Adding the kept rows
into the residual in one ``index_add`` does both: 0.58 ms against 1.49 ms for the scatter plus add
(2,048 x 384, 320 rows kept, 1 CPU thread; ``benchmarks/results/scatter_gather_ab``). The sums are the same
``y + r``, so outputs are bit-for-bit those of the scatter. Nothing is stored: a pruned model built
or loaded from its config gets the fused forward from its structure alone.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from .pruned_linear import PrunedLinear

__all__ = ["RESIDUAL_OUTPUT_TYPES", "ResidualAddOutput", "adds_into_residual", "fuse_residual_adds"]

#: Model types whose output ``dense`` layers feed a ``LayerNorm(dropout(dense(h)) + residual)`` module
#: (``BertSelfOutput``/``BertOutput`` and their copies, ``DebertaV2*Output``, ``MPNetOutput``), so a
#: row-pruned ``dense`` can add its kept rows straight into the residual. GPT-2, Llama and the other
#: decoders add in the block's own forward and keep the scatter. (The architecture table,
#: ``sparse_models.architectures``, reads it from here: the pruned model must not import the package.)
RESIDUAL_OUTPUT_TYPES = ("bert", "roberta", "xlm-roberta", "electra", "deberta-v2", "mpnet")


def adds_into_residual(model_type: str, name: str, parent: nn.Module | None) -> bool:
    """Whether the layer ``name`` (its parent module ``parent``) is an output ``dense`` whose module
    adds the residual right after it, so a row scatter there can be an ``index_add`` instead."""
    return (model_type in RESIDUAL_OUTPUT_TYPES and name.endswith("output.dense") and parent is not None
            and all(hasattr(parent, a) for a in ("dense", "dropout", "LayerNorm")))


class ResidualAddOutput(nn.Module):
    """``LayerNorm(dropout(dense(h)) + residual)`` with the kept rows of a row-pruned ``dense`` added
    into the residual. Mixed into the model's own output class (its ``__init__`` and attributes kept);
    while training with dropout it runs the stock forward, whose dropout sees the full-width output."""

    dense: PrunedLinear
    dropout: nn.Dropout
    LayerNorm: nn.Module

    def forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
        if self.training and self.dropout.p > 0:
            return super().forward(hidden_states, input_tensor)
        return self.LayerNorm(self.dense.add_to(hidden_states, input_tensor))


@functools.cache
def _fused(cls: type) -> type:
    if issubclass(cls, ResidualAddOutput):
        return cls
    return type(f"ResidualAdd{cls.__name__}", (ResidualAddOutput, cls), {})


def fuse_residual_adds(model: nn.Module, model_type: str) -> list[str]:
    """Give every output module whose ``dense`` scatters its kept rows the fused forward; returns
    their names. Other architectures are left as they are."""
    fused = []
    for name, module in model.named_modules():
        if isinstance(module, PrunedLinear) and module.scatter_out:
            parent_name = name.rpartition(".")[0]
            parent = model.get_submodule(parent_name) if parent_name else None
            if adds_into_residual(model_type, name, parent) and parent.dense is module:
                parent.__class__ = _fused(type(parent))
                fused.append(parent_name)
    return fused
