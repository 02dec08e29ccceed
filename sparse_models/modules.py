"""Finding and swapping submodules: the two helpers that gating, pruning and the pruned model classes
all need, kept here so none of them imports another for them."""

from __future__ import annotations

from peft import PeftModel
from peft.tuners.tuners_utils import BaseTuner
from torch import nn

__all__ = ["replace_module", "unwrap_gated_model"]


def unwrap_gated_model(model: nn.Module) -> nn.Module:
    """The transformers model inside a ``PeftModel`` or tuner, or ``model`` itself."""
    if isinstance(model, PeftModel):
        model = model.base_model
    if isinstance(model, BaseTuner):
        model = model.model
    return model


def replace_module(model: nn.Module, name: str, new: nn.Module) -> None:
    """Put ``new`` where the submodule called ``name`` is."""
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)
