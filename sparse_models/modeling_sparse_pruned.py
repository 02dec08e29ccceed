"""Pruned ``SparsePruned*`` models: the original architecture with ``PrunedLinear`` layers swapped in.

The classes wrap an ordinary transformers model (``self.model``), so every architecture that can be
gated can also be pruned, and they register with the Auto classes on ``import sparse_models``.
"""

from __future__ import annotations

from typing import Any

from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    PreTrainedModel,
)

from sparse_models.configuration_sparse_pruned import SparsePrunedConfig
from sparse_models.modules import replace_module
from sparse_models.pruned_linear import PrunedLinear

__all__ = [
    "SparsePrunedPreTrainedModel",
    "SparsePrunedModel",
    "SparsePrunedForSequenceClassification",
    "SparsePrunedForCausalLM",
    "wrap_pruned",
]

_AUTO_FOR_HEAD = {
    "sequence_classification": AutoModelForSequenceClassification,
    "causal_lm": AutoModelForCausalLM,
    "base": AutoModel,
}


class SparsePrunedPreTrainedModel(PreTrainedModel):
    """Common loading/saving for pruned models; ``forward`` is the inner model's."""

    config_class = SparsePrunedConfig
    base_model_prefix = "model"
    head = "base"
    supports_gradient_checkpointing = True
    _supports_sdpa = True

    def __init__(self, config: SparsePrunedConfig, model: nn.Module | None = None) -> None:
        super().__init__(config)
        if model is None:
            model = _AUTO_FOR_HEAD[config.head].from_config(config.inner_config())
            _install_pruned_shapes(model, config.pruned_modules)
            set_attention_head_sizes(model, config.attention_head_sizes)
        self.model = model
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        """Nothing to initialise here: inner weights come from pruning or the checkpoint."""

    def get_input_embeddings(self) -> nn.Module:
        return self.model.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.model.set_input_embeddings(value)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.model(*args, **kwargs)


class SparsePrunedModel(SparsePrunedPreTrainedModel):
    head = "base"


class SparsePrunedForSequenceClassification(SparsePrunedPreTrainedModel):
    head = "sequence_classification"


class SparsePrunedForCausalLM(SparsePrunedPreTrainedModel):
    head = "causal_lm"

    def get_output_embeddings(self) -> nn.Module:
        return self.model.get_output_embeddings()


_CLASS_FOR_HEAD = {cls.head: cls for cls in (SparsePrunedModel, SparsePrunedForSequenceClassification, SparsePrunedForCausalLM)}


def _install_pruned_shapes(model: nn.Module, records: dict[str, dict[str, Any]]) -> None:
    """Give a freshly built model the pruned layer shapes so a checkpoint's tensors fit."""

    for name, rec in records.items():
        if rec["kept_out"] == rec["out_features"] and rec["kept_in"] == rec["in_features"]:
            continue
        layer = PrunedLinear(
            rec["in_features"], rec["out_features"], rec["kept_in"], rec["kept_out"],
            rec["gather_in"], rec["scatter_out"], rec["bias"],
        )
        replace_module(model, name, layer)


def set_attention_head_sizes(model: nn.Module, sizes: dict[str, int]) -> None:
    """Make each named self-attention reshape into its reduced head size; its ``scaling`` attribute keeps
    the original head size's value, so scores are unchanged."""
    for name, size in sizes.items():
        attention = model.get_submodule(name)
        attention.attention_head_size = size
        attention.all_head_size = attention.num_attention_heads * size


def _head_of(model: nn.Module) -> str:
    for head, auto in (("sequence_classification", AutoModelForSequenceClassification),
                       ("causal_lm", AutoModelForCausalLM)):
        if type(model) in auto._model_mapping.values():
            return head
    return "base"


def wrap_pruned(
    dense: PreTrainedModel, plan: Any, dense_parameters: int, trainable_parameters: int | None = None
) -> SparsePrunedPreTrainedModel:
    """Wrap an already pruned transformers model in the ``SparsePruned*`` class of its head."""
    head = _head_of(dense)
    config = SparsePrunedConfig(
        base_config=dense.config.to_dict(),
        head=head,
        pruned_modules={name: p.record() for name, p in plan.modules.items()},
        dense_parameters=dense_parameters,
        gate_counts={
            "closed_rows": plan.closed_rows, "total_rows": plan.total_rows,
            "closed_cols": plan.closed_cols, "total_cols": plan.total_cols,
        },
        trainable_parameters=trainable_parameters,
        attention_head_sizes=dict(plan.attention_head_sizes),
        architectures=[_CLASS_FOR_HEAD[head].__name__],
    )
    wrapped = _CLASS_FOR_HEAD[head](config, model=dense)
    wrapped.to(next(dense.parameters()).device)
    return wrapped.eval()


AutoConfig.register(SparsePrunedConfig.model_type, SparsePrunedConfig, exist_ok=True)
AutoModel.register(SparsePrunedConfig, SparsePrunedModel, exist_ok=True)
AutoModelForSequenceClassification.register(SparsePrunedConfig, SparsePrunedForSequenceClassification, exist_ok=True)
AutoModelForCausalLM.register(SparsePrunedConfig, SparsePrunedForCausalLM, exist_ok=True)
