"""The physically pruned model (``SparsePruned*``: what ``merge_and_unload()`` returns), standing alone:
its configuration, modeling, pruned linear and attention, and residual fusion import only torch and
transformers, so the same files travel beside saved weights as remote code (``auto_map``,
``trust_remote_code=True``). Importing this package registers the ``sparse_gated`` model type with the
transformers Auto classes, so the package loads them without remote code."""

from __future__ import annotations

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSequenceClassification

from sparse_models.pruned.configuration_sparse_pruned import SparsePrunedConfig
from sparse_models.pruned.modeling_sparse_pruned import (
    QueryKeyNarrowedAttention,
    SparsePrunedForCausalLM,
    SparsePrunedForSequenceClassification,
    SparsePrunedModel,
    SparsePrunedPreTrainedModel,
)
from sparse_models.pruned.pruned_linear import PrunedLinear
from sparse_models.pruned.residual_add import ResidualAddOutput

__all__ = ["PrunedLinear", "QueryKeyNarrowedAttention", "ResidualAddOutput", "SparsePrunedConfig",
           "SparsePrunedForCausalLM", "SparsePrunedForSequenceClassification", "SparsePrunedModel",
           "SparsePrunedPreTrainedModel"]

AutoConfig.register(SparsePrunedConfig.model_type, SparsePrunedConfig, exist_ok=True)
AutoModel.register(SparsePrunedConfig, SparsePrunedModel, exist_ok=True)
AutoModelForSequenceClassification.register(SparsePrunedConfig, SparsePrunedForSequenceClassification, exist_ok=True)
AutoModelForCausalLM.register(SparsePrunedConfig, SparsePrunedForCausalLM, exist_ok=True)
