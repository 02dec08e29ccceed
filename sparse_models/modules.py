"""Finding the transformers model inside a gated one: what gating, pruning and accounting all need, kept
here so none of them imports another for it (swapping a submodule is the pruned model's
``replace_module``)."""

from __future__ import annotations

from peft import PeftModel
from peft.tuners.tuners_utils import BaseTuner
from torch import nn

__all__ = ["unwrap_gated_model"]


def unwrap_gated_model(model: nn.Module) -> nn.Module:
    """The transformers model inside a ``PeftModel`` or tuner, or ``model`` itself."""
    if isinstance(model, PeftModel):
        model = model.base_model
    if isinstance(model, BaseTuner):
        model = model.model
    return model
