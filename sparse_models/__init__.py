"""FineGates-style sparse gates as a PEFT method, pruned model classes, accounting and the lm-eval model.

``import sparse_models`` registers the ``sparse_gates`` PEFT method and the ``sparse_gated`` model
type with the transformers Auto classes.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .accounting import ParameterAccounting, parameter_accounting
from .configuration_sparse_gated import SparseGatedConfig
from .modeling_sparse_gated import (
    SparseGatedForCausalLM,
    SparseGatedForSequenceClassification,
    SparseGatedModel,
    SparseGatedPreTrainedModel,
)
from .pruned_linear import PrunedLinear
from .pruning import plan_pruning
from .sparse_gates import SparseGatesConfig, SparseGatesModel

__all__ = [
    "ParameterAccounting",
    "PrunedLinear",
    "SparseGatedConfig",
    "SparseGatedForCausalLM",
    "SparseGatedForSequenceClassification",
    "SparseGatedModel",
    "SparseGatedPreTrainedModel",
    "SparseGatesConfig",
    "SparseGatesModel",
    "parameter_accounting",
    "plan_pruning",
]
