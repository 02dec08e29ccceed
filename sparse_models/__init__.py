"""Layer 2, the method core: FineGates-style sparse gates as a PEFT method (``SparseGatesConfig``,
``SparseGatesModel``: the *adapter*), the physically pruned model classes (``SparsePruned*``: what
``merge_and_unload()`` returns), the pruning plan, the removal schedule, the trainer that runs it,
and parameter accounting. It builds on the GLUE evaluation layer only (for task facts and scoring).

``import sparse_models`` registers the ``sparse_gates`` PEFT method and the ``sparse_gated`` model
type with the transformers Auto classes.
"""

from __future__ import annotations

import glue_sparse_tasks
from glue_sparse_tasks.deprecations import removal_notice
from sparse_models.accounting import ParameterAccounting, parameter_accounting
from sparse_models.pruned import (
    PrunedLinear,
    QueryKeyNarrowedAttention,
    ResidualAddOutput,
    SparsePrunedConfig,
    SparsePrunedForCausalLM,
    SparsePrunedForSequenceClassification,
    SparsePrunedModel,
    SparsePrunedPreTrainedModel,
)
from sparse_models.removal import RemovalSchedule, close_lowest
from sparse_models.sparse_gates import SparseGatesConfig, SparseGatesModel
from sparse_models.sparse_gates.pruning import plan_pruning

__all__ = [
    "ParameterAccounting",
    "PrunedLinear",
    "QueryKeyNarrowedAttention",
    "RemovalCallback",
    "RemovalSchedule",
    "ResidualAddOutput",
    "SparseGatesConfig",
    "SparseGatesModel",
    "SparseGatesTrainer",
    "SparsePrunedConfig",
    "SparsePrunedForCausalLM",
    "SparsePrunedForSequenceClassification",
    "SparsePrunedModel",
    "SparsePrunedPreTrainedModel",
    "close_lowest",
    "parameter_accounting",
    "plan_pruning",
]

#: Names of the pruned classes before they were told apart from the adapter (``SparseGates*``) by
#: more than one letter. Still importable (with a DeprecationWarning) until ``glue_sparse_tasks.deprecations``, not
#: exported; saved configs naming them still load (the Auto classes go by ``model_type``, which did not
#: change).
RENAMED = {
    "SparseGatedConfig": "SparsePrunedConfig",
    "SparseGatedPreTrainedModel": "SparsePrunedPreTrainedModel",
    "SparseGatedModel": "SparsePrunedModel",
    "SparseGatedForSequenceClassification": "SparsePrunedForSequenceClassification",
    "SparseGatedForCausalLM": "SparsePrunedForCausalLM",
}


#: exported, but imported on first use: the trainer loads transformers' Trainer (and accelerate), which
#: ``import sparse_models`` (run by lm-eval's start-up registration too) does not need
LAZY = {"SparseGatesTrainer": "sparse_models.trainer", "RemovalCallback": "sparse_models.trainer"}


def __getattr__(name: str):
    if name in LAZY:
        import importlib

        return getattr(importlib.import_module(LAZY[name]), name)
    if name in RENAMED:
        import warnings

        warnings.warn(f"sparse_models.{name} is now sparse_models.{RENAMED[name]}; "
                      f"{removal_notice()}", DeprecationWarning, stacklevel=2)
        return globals()[RENAMED[name]]
    if name == "__version__":  # read once, in glue_sparse_tasks
        return glue_sparse_tasks.__version__
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
