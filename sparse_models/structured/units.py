"""The removable units of a Llama-style decoder: whole attention heads and whole FFN channels.

A *query head* is ``head_dim`` rows of ``q_proj`` and the same ``head_dim`` columns of ``o_proj``; a
*key/value head* (``head_dim`` rows of ``k_proj`` and of ``v_proj``) goes only when every query head it
serves is gone (grouped-query attention). An *FFN channel* is one row of ``gate_proj`` and of
``up_proj`` and the matching column of ``down_proj``. Removing units narrows matrices without any
index work at run time: the residual stream keeps its width and ``o_proj``/``down_proj`` add straight
into it. Shapes are read from the config (``head_dim``, ``num_key_value_heads``), so GQA models such as
SmolLM2 and Llama 3 work as well as multi-head ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from glue_sparse_tasks.errors import UserInputError

__all__ = ["ATTENTION", "MLP", "LayerUnits", "UnitPlan", "decoder_units", "block_linear_names"]

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP = ("gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class LayerUnits:
    """One decoder layer's unit shapes and module names (``prefix`` + ``self_attn.q_proj`` ...)."""

    prefix: str
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    channels: int

    @property
    def group(self) -> int:
        """Query heads per key/value head."""
        return self.heads // self.kv_heads

    def module(self, short: str) -> str:
        return f"{self.prefix}{'self_attn' if short in ATTENTION else 'mlp'}.{short}"

    @property
    def attention(self) -> str:
        return f"{self.prefix}self_attn"

    def head_cost(self) -> int:
        """Weights one query head takes out (its q rows and o columns)."""
        return 2 * self.head_dim * self.hidden

    def kv_cost(self) -> int:
        """Weights one key/value head takes out (its k and v rows)."""
        return 2 * self.head_dim * self.hidden

    def channel_cost(self) -> int:
        return 3 * self.hidden

    def block_weights(self) -> int:
        return 2 * self.heads * self.head_dim * self.hidden + self.kv_heads * self.kv_cost() \
            + self.channels * self.channel_cost()


def decoder_units(model: nn.Module) -> list[LayerUnits]:
    """Every decoder layer's units, or a one-line error for a model without Llama-style heads.

    A Llama-style layer has ``self_attn.{q,k,v,o}_proj`` and ``mlp.{gate,up,down}_proj`` as
    ``nn.Linear`` with the shapes its config states; anything else (GPT-2's fused ``c_attn``, an
    encoder) is refused before a head-based method touches it."""
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", type(model).__name__)
    heads = getattr(config, "num_attention_heads", None)
    if config is None or not heads:
        raise UserInputError(f"{model_type}: head-based pruning needs a transformers causal LM with "
                             "num_attention_heads in its config")
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    named = dict(model.named_modules())
    prefixes = [n[: -len("self_attn.q_proj")] for n in named if n.endswith("self_attn.q_proj")]  # layer order
    if not prefixes:
        raise UserInputError(f"{model_type}: head-based pruning needs Llama-style layers (self_attn.q_proj, "
                             f"k_proj, v_proj, o_proj and mlp.gate_proj, up_proj, down_proj); this model has none")
    layers = []
    for prefix in prefixes:
        unit = LayerUnits(prefix, config.hidden_size, heads, kv_heads, head_dim,
                          getattr(named.get(prefix + "mlp.up_proj"), "out_features", 0))
        expected = {"q_proj": (heads * head_dim, unit.hidden), "k_proj": (kv_heads * head_dim, unit.hidden),
                    "v_proj": (kv_heads * head_dim, unit.hidden), "o_proj": (unit.hidden, heads * head_dim),
                    "gate_proj": (unit.channels, unit.hidden), "up_proj": (unit.channels, unit.hidden),
                    "down_proj": (unit.hidden, unit.channels)}
        for short, shape in expected.items():
            module = named.get(unit.module(short))
            if not isinstance(module, nn.Linear) or tuple(module.weight.shape) != shape:
                found = "missing" if module is None else type(module).__name__
                if isinstance(module, nn.Linear):
                    found += f" {tuple(module.weight.shape)}"
                raise UserInputError(f"{model_type}: {unit.module(short)} should be an nn.Linear of shape {shape} "
                                     f"for head-based pruning, found {found}")
        if heads % kv_heads:
            raise UserInputError(f"{model_type}: {heads} attention heads do not split into {kv_heads} key/value groups")
        layers.append(unit)
    return layers


def block_linear_names(layers: list[LayerUnits]) -> list[str]:
    return [layer.module(short) for layer in layers for short in (*ATTENTION, *MLP)]


@dataclass
class UnitPlan:
    """Which query heads and FFN channels every layer keeps (boolean masks), and the biases a method
    adds to ``o_proj``/``down_proj`` to make up for what it removed (FLAP's compensation)."""

    layers: list[LayerUnits]
    heads: list[torch.Tensor]
    channels: list[torch.Tensor]
    bias: dict[str, torch.Tensor] = field(default_factory=dict)

    @classmethod
    def dense(cls, layers: list[LayerUnits]) -> "UnitPlan":
        return cls(layers, [torch.ones(u.heads, dtype=torch.bool) for u in layers],
                   [torch.ones(u.channels, dtype=torch.bool) for u in layers])

    def kv_heads(self, index: int) -> torch.Tensor:
        """Key/value heads layer ``index`` keeps: those serving at least one kept query head."""
        unit = self.layers[index]
        return self.heads[index].view(unit.kv_heads, unit.group).any(dim=1)

    def removed_weights(self) -> int:
        """Block-linear weights the plan removes (biases aside), as the pruned model's records count them."""
        total = 0
        for i, unit in enumerate(self.layers):
            total += int((~self.heads[i]).sum()) * unit.head_cost() + int((~self.kv_heads(i)).sum()) * unit.kv_cost()
            total += int((~self.channels[i]).sum()) * unit.channel_cost()
        return total

    def block_weights(self) -> int:
        return sum(u.block_weights() for u in self.layers)

    def removed_share(self) -> float:
        """Share of decoder-block linear weights removed (embeddings, norms and lm_head excluded)."""
        return self.removed_weights() / self.block_weights()

    def kept_rows(self, index: int) -> dict[str, torch.Tensor]:
        """Row (output) indices each of layer ``index``'s seven matrices keeps, and its columns in ``cols``."""
        unit = self.layers[index]
        q = _expand(self.heads[index], unit.head_dim)
        kv = _expand(self.kv_heads(index), unit.head_dim)
        ch = torch.nonzero(self.channels[index]).flatten()
        return {"q_proj": q, "k_proj": kv, "v_proj": kv, "gate_proj": ch, "up_proj": ch, "o_cols": q, "down_cols": ch}

    def to_dict(self) -> dict[str, Any]:
        return {"heads_kept": [int(h.sum()) for h in self.heads],
                "channels_kept": [int(c.sum()) for c in self.channels],
                "kv_heads_kept": [int(self.kv_heads(i).sum()) for i in range(len(self.layers))],
                "removed_share_of_block_linears": self.removed_share(), "compensated": sorted(self.bias)}


def _expand(mask: torch.Tensor, width: int) -> torch.Tensor:
    """Indices of the ``width`` rows of every kept unit."""
    return torch.nonzero(mask.repeat_interleave(width)).flatten()


def check_llama_heads(model_path: str) -> None:
    """Refuse a model without Llama-style heads from its config alone (built on the meta device)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model_path)
    with torch.device("meta"):
        decoder_units(AutoModelForCausalLM.from_config(config))
