"""Pruned ``SparsePruned*`` models: the original architecture with ``PrunedLinear`` layers swapped in.

The classes wrap an ordinary transformers model (``self.model``), so every architecture that can be
gated can also be pruned. They register with the Auto classes on ``import sparse_models``, and travel
beside saved weights as remote code (``trust_remote_code=True``): this folder imports only torch and
transformers, and its modules import one another relatively.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    PreTrainedModel,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from .configuration_sparse_pruned import SparsePrunedConfig
from .pruned_attention import set_kept_heads
from .pruned_linear import PrunedLinear
from .residual_add import fuse_residual_adds

__all__ = [
    "SparsePrunedPreTrainedModel",
    "SparsePrunedModel",
    "SparsePrunedForSequenceClassification",
    "SparsePrunedForCausalLM",
    "AUTO_MAP",
    "copy_code",
    "replace_module",
    "wrap_pruned",
    "wrap_pruned_records",
]

def replace_module(model: nn.Module, name: str, new: nn.Module) -> None:
    """Put ``new`` where the submodule called ``name`` is."""
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)


_AUTO_FOR_HEAD = {
    "sequence_classification": AutoModelForSequenceClassification,
    "causal_lm": AutoModelForCausalLM,
    "base": AutoModel,
}


#: the remote-code entry points every saved pruned model carries in its config, beside this folder's files
AUTO_MAP = {
    "AutoConfig": "configuration_sparse_pruned.SparsePrunedConfig",
    "AutoModel": "modeling_sparse_pruned.SparsePrunedModel",
    "AutoModelForSequenceClassification": "modeling_sparse_pruned.SparsePrunedForSequenceClassification",
    "AutoModelForCausalLM": "modeling_sparse_pruned.SparsePrunedForCausalLM",
}


def copy_code(folder: str | os.PathLike) -> list[Path]:
    """Copy this module and every module it imports relatively (the pruned model's whole code: configuration,
    modeling, pruned linear and attention, residual fusion) into ``folder``; the copied paths."""
    from transformers.dynamic_module_utils import get_relative_import_files

    here = Path(__file__)
    copied = []
    for source in [here, *map(Path, get_relative_import_files(str(here)))]:
        target = Path(folder) / source.name
        if source.resolve() != target.resolve():
            shutil.copyfile(source, target)
        copied.append(target)
    return copied


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
            set_kept_heads(model, config.attention_heads)
        fuse_residual_adds(model, config.base_config.get("model_type", ""))
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

    def save_pretrained(self, save_directory: str | os.PathLike, *args: Any, **kwargs: Any) -> Any:
        """Save as transformers does, with the model's code beside the weights and ``auto_map`` in its config,
        so the folder loads where glue-sparse is not installed (``trust_remote_code=True``)."""
        self.config.auto_map = dict(AUTO_MAP)
        out = super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True):
            copy_code(save_directory)
        return out


class SparsePrunedModel(SparsePrunedPreTrainedModel):
    head = "base"


class SparsePrunedForSequenceClassification(SparsePrunedPreTrainedModel):
    head = "sequence_classification"


class SparsePrunedForCausalLM(SparsePrunedPreTrainedModel):
    """A pruned causal LM; ``.model.generate`` generates as the original (key/value cache included)."""

    head = "causal_lm"

    def get_output_embeddings(self) -> nn.Module:
        return self.model.get_output_embeddings()


_CLASS_FOR_HEAD = {cls.head: cls for cls in (SparsePrunedModel, SparsePrunedForSequenceClassification,
                                              SparsePrunedForCausalLM)}


def _install_pruned_shapes(model: nn.Module, records: dict[str, dict[str, Any]]) -> None:
    """Give a freshly built model the pruned layer shapes so a checkpoint's tensors fit."""

    for name, rec in records.items():
        unchanged = rec["kept_out"] == rec["out_features"] and rec["kept_in"] == rec["in_features"]
        if unchanged and not rec.get("added_bias"):
            continue
        layer = PrunedLinear(
            rec["in_features"], rec["out_features"], rec["kept_in"], rec["kept_out"],
            rec["gather_in"], rec["scatter_out"], rec["bias"],
        )
        replace_module(model, name, layer)


def set_attention_head_sizes(model: nn.Module, sizes: dict[str, Any]) -> None:
    """Make each named self-attention reshape into its reduced head sizes; its ``scaling`` attribute keeps
    the original head size's value, so scores are unchanged.

    A size is ``{"query_key": a, "value": b}`` or one int for both (checkpoints saved before the two
    could differ). Where they differ the module runs ``QueryKeyNarrowedAttention``'s forward, since the
    stock one views query, key and value with one head size."""
    for name, size in sizes.items():
        attention = model.get_submodule(name)
        query_key, value = (size, size) if isinstance(size, int) else (size["query_key"], size["value"])
        attention.attention_head_size = value
        attention.all_head_size = attention.num_attention_heads * value
        if query_key != value:
            attention.__class__ = _query_key_narrowed(type(attention))
            attention.query_key_head_size = query_key


class QueryKeyNarrowedAttention(nn.Module):
    """Self-attention (BERT-style encoder) whose query/key heads differ in size from its value heads.

    Trained gates close most query/key dimensions of early layers but few value dimensions, so one
    shared head size narrows nothing there. Scores need only the open query/key dimensions, the output
    needs the value ones. Eager attention takes the two sizes apart; fused kernels (torch's SDPA flash
    kernel, flash-attention) need one, and handed two, SDPA falls back to a slower composite. For them
    the narrower side is padded with zero dimensions after its projection (a zero query/key dimension
    adds 0 to every score, a zero value dimension's output is dropped): the padded MiniLM ran ~1.4%
    faster whole, in 7 of 8 paired runs (``benchmarks/results/narrowed_attention_ab``). Mixed into the
    model's own attention class, whose ``__init__`` and attributes it keeps; encoders only (no cache)."""

    query_key_head_size: int
    stock_class: type  # the model's own attention class, whose module holds its eager attention

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                cache: Any = None, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
        if cache is not None or kwargs.pop("past_key_values", None) is not None:
            raise ValueError("attention narrowed per head runs without a key/value cache (encoders only)")
        lead = hidden_states.shape[:-1]
        implementation = self.config._attn_implementation
        width = 0 if implementation == "eager" else max(self.query_key_head_size, self.attention_head_size)
        query = _heads(self.query(hidden_states), lead, self.query_key_head_size, width)
        key = _heads(self.key(hidden_states), lead, self.query_key_head_size, width)
        value = _heads(self.value(hidden_states), lead, self.attention_head_size, width)
        eager = sys.modules[self.stock_class.__module__].eager_attention_forward
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager)
        output, weights = attend(self, query, key, value, attention_mask,
                                 dropout=self.dropout.p if self.training else 0.0, scaling=self.scaling, **kwargs)
        return output[..., : self.attention_head_size].reshape(*lead, -1).contiguous(), weights


def _heads(projected: torch.Tensor, lead: torch.Size, head_size: int, width: int) -> torch.Tensor:
    """(batch, heads, length, max(head_size, width)): the projection split into heads, zero-padded to ``width``."""
    heads = projected.view(*lead, -1, head_size)
    if width > head_size:
        heads = F.pad(heads, (0, width - head_size))
    return heads.transpose(1, 2)


@functools.cache
def _query_key_narrowed(cls: type) -> type:
    if issubclass(cls, QueryKeyNarrowedAttention):
        return cls
    return type(f"QueryKeyNarrowed{cls.__name__}", (QueryKeyNarrowedAttention, cls), {"stock_class": cls})


def _head_of(model: nn.Module) -> str:
    """By class name against the Auto mappings' name tables (comparing classes would import every model)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES,
    )

    name = type(model).__name__
    for head, names in (("sequence_classification", MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES),
                        ("causal_lm", MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)):
        if any(name == v or (isinstance(v, tuple) and name in v) for v in names.values()):
            return head
    return "base"


def wrap_pruned(
    dense: PreTrainedModel, plan: Any, dense_parameters: int, trainable_parameters: int | None = None
) -> SparsePrunedPreTrainedModel:
    """Wrap an already pruned transformers model in the ``SparsePruned*`` class of its head."""
    gate_counts = {"closed_rows": plan.closed_rows, "total_rows": plan.total_rows,
                   "closed_cols": plan.closed_cols, "total_cols": plan.total_cols}
    return wrap_pruned_records(dense, plan.records(), gate_counts, dense_parameters, trainable_parameters,
                               attention_head_sizes=dict(plan.attention_head_sizes))


def wrap_pruned_records(
    dense: PreTrainedModel, records: dict[str, dict[str, Any]], gate_counts: dict[str, int], dense_parameters: int,
    trainable_parameters: int | None = None, attention_head_sizes: dict[str, Any] | None = None,
    attention_heads: dict[str, list[int]] | None = None,
) -> SparsePrunedPreTrainedModel:
    """``wrap_pruned`` from the shape records themselves: what any pruning method (gates' plan, or the
    head/channel removal of ``sparse_models.structured``) hands over."""
    head = _head_of(dense)
    config = SparsePrunedConfig(
        base_config=dense.config.to_dict(),
        head=head,
        pruned_modules=records,
        dense_parameters=dense_parameters,
        gate_counts=gate_counts,
        trainable_parameters=trainable_parameters,
        attention_head_sizes=attention_head_sizes,
        attention_heads=attention_heads,
        architectures=[_CLASS_FOR_HEAD[head].__name__],
    )
    wrapped = _CLASS_FOR_HEAD[head](config, model=dense)
    wrapped.to(next(dense.parameters()).device)
    return wrapped.eval()
