"""Llama-style attention with whole query heads removed, grouped-query attention included.

Stock attention repeats each key/value head for ``num_key_value_groups`` consecutive query heads. After
head removal a layer may keep, say, 3 query heads of one group and 1 of another: no single group size
fits. Where every kept key/value head still serves the same number of kept query heads, the stock
forward runs with that number (``num_key_value_groups`` reset, no other change). Otherwise the module
runs ``HeadPrunedAttention``'s forward, which picks for each kept query head its key/value head
(``kv_for_query``) and then calls the model's own attention kernel; a layer with no query head left
adds only ``o_proj``'s bias (FLAP's compensation) or nothing.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Mapping, Sequence

import torch
from torch import nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

__all__ = ["HeadPrunedAttention", "set_kept_heads"]


class HeadPrunedAttention(nn.Module):
    """Mixed into the model's own attention class (whose ``__init__``, projections and attributes it keeps)."""

    stock_class: type
    kv_for_query: tuple[int, ...]  # per kept query head, its index among the kept key/value heads

    def _kv_index(self, device: torch.device) -> torch.Tensor:
        """``kv_for_query`` as an index tensor on ``device``; a plain attribute, not a buffer, so models
        built on the meta device (``from_pretrained``) get it too."""
        cached = getattr(self, "_kv_index_cache", None)
        if cached is None or cached.device != device:
            cached = self._kv_index_cache = torch.tensor(self.kv_for_query, dtype=torch.long, device=device)
        return cached

    def forward(self, hidden_states: torch.Tensor, position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
                attention_mask: torch.Tensor | None = None, cache: Any = None,
                **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
        cache = kwargs.pop("past_key_values", cache)
        lead = hidden_states.shape[:-1]
        if not self.kv_for_query:  # every head of this layer removed
            return self.o_proj(hidden_states.new_zeros(*lead, 0)), None
        shape = (*lead, -1, self.head_dim)
        query, key = self.q_proj(hidden_states).view(shape), self.k_proj(hidden_states).view(shape)
        if hasattr(self, "q_norm"):  # Qwen3 normalises each head before the rotation
            query, key = self.q_norm(query), self.k_norm(key)
        query, key = query.transpose(1, 2), key.transpose(1, 2)
        value = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        stock = sys.modules[self.stock_class.__module__]
        cos, sin = position_embeddings
        query, key = stock.apply_rotary_pos_emb(query, key, cos, sin)
        if cache is not None:
            key, value = cache.update(key, value, self.layer_idx, kwargs=kwargs)
        index = self._kv_index(key.device)
        key, value = key.index_select(1, index), value.index_select(1, index)
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, stock.eager_attention_forward)
        window = (self.sliding_window if hasattr(self, "sliding_window")
                  else getattr(self.config, "sliding_window", None))
        if window is not None:  # Mistral, Qwen2/3: their attention passes its window to the kernel
            kwargs.setdefault("sliding_window", window)
        output, weights = attend(self, query, key, value, attention_mask,
                                 dropout=self.attention_dropout if self.training else 0.0, scaling=self.scaling,
                                 **kwargs)
        return self.o_proj(output.reshape(*lead, -1).contiguous()), weights


@functools.cache
def _head_pruned(cls: type) -> type:
    if issubclass(cls, HeadPrunedAttention):
        return cls
    return type(f"HeadPruned{cls.__name__}", (HeadPrunedAttention, cls), {"stock_class": cls})


def set_kept_heads(model: nn.Module, heads: Mapping[str, Sequence[int]]) -> None:
    """Make each named attention run its kept query heads: ``heads`` maps the attention module's name to,
    per kept query head, the index of its key/value head among the kept ones (what the pruned config
    stores as ``attention_heads``)."""
    for name, kv_for_query in heads.items():
        attention = model.get_submodule(name)
        kv = tuple(int(i) for i in kv_for_query)
        counts = [kv.count(i) for i in range(max(kv) + 1)] if kv else []
        if kv and len(set(counts)) == 1 and list(kv) == sorted(kv):
            attention.num_key_value_groups = counts[0]  # regular: the stock forward fits
            continue
        attention.__class__ = _head_pruned(type(attention))
        attention.num_key_value_groups = 1  # keys and values arrive already picked per query head
        attention.kv_for_query = kv
