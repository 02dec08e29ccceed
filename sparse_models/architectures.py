"""Per-architecture facts: which linear layers to gate by default and which ones feed each other.

A *chain* says that the outputs of ``producers`` reach ``consumer`` only through an element-wise
function that maps 0 to 0 (GELU, SiLU, ReLU, or the attention mix for values). A closed producer row
therefore lets the matching consumer column go too. ``narrow`` chains can pass a narrower tensor
between the two matrices (the FFN); value -> attention-output chains cannot, because attention
reshapes the value into heads, so the value keeps its width and only the consumer's columns go.
``mutual`` chains pair query and key rows: a score is a sum of q_d * k_d, so a dimension closed in
either one is dead in both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from glue_sparse_tasks.errors import UserInputError

__all__ = ["Chain", "DEFAULT_TARGET_MODULES", "CHAINS", "RESIDUAL_OUTPUT_TYPES", "default_target_modules", "chains_for",
           "max_input_length"]

_BERT_TARGETS = ("query", "key", "value", "attention.output.dense", "intermediate.dense", "output.dense")
_LLAMA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

DEFAULT_TARGET_MODULES: dict[str, tuple[str, ...]] = {
    "bert": _BERT_TARGETS,
    "roberta": _BERT_TARGETS,
    "xlm-roberta": _BERT_TARGETS,
    "electra": _BERT_TARGETS,
    "gpt2": ("c_attn", "c_proj", "c_fc"),
    "llama": _LLAMA_TARGETS,
    "mistral": _LLAMA_TARGETS,
    "qwen2": _LLAMA_TARGETS,
    "qwen3": _LLAMA_TARGETS,
}


@dataclass(frozen=True)
class Chain:
    """Module-name suffixes inside one block: ``producers`` feed ``consumer`` through a zero-preserving map."""

    producers: tuple[str, ...]
    consumer: str
    narrow: bool
    needs_zero_activation: bool
    mutual: bool = False


_BERT_CHAINS = (
    Chain(("intermediate.dense",), "output.dense", narrow=True, needs_zero_activation=True),
    Chain(("attention.self.value",), "attention.output.dense", narrow=False, needs_zero_activation=False),
    Chain(("attention.self.key",), "attention.self.query", narrow=False, needs_zero_activation=False, mutual=True),
)
_LLAMA_CHAINS = (
    Chain(("mlp.gate_proj", "mlp.up_proj"), "mlp.down_proj", narrow=True, needs_zero_activation=True),
    Chain(("self_attn.v_proj",), "self_attn.o_proj", narrow=False, needs_zero_activation=False),
    # No query/key pairing here: rotary embeddings mix dimension d with d + head_dim/2 after the projection.
)

CHAINS: dict[str, tuple[Chain, ...]] = {
    "bert": _BERT_CHAINS,
    "roberta": _BERT_CHAINS,
    "xlm-roberta": _BERT_CHAINS,
    "electra": _BERT_CHAINS,
    # GPT-2 fuses q, k and v into c_attn, so only its FFN chains.
    "gpt2": (Chain(("mlp.c_fc",), "mlp.c_proj", narrow=True, needs_zero_activation=True),),
    "llama": _LLAMA_CHAINS,
    "mistral": _LLAMA_CHAINS,
    "qwen2": _LLAMA_CHAINS,
    "qwen3": _LLAMA_CHAINS,
}


#: Model types whose residual adds happen inside output modules named ``*output`` holding ``dense``,
#: ``dropout`` and ``LayerNorm`` and computing ``LayerNorm(dropout(dense(h)) + residual)`` (transformers'
#: ``BertSelfOutput``/``BertOutput`` and their copies), so a row-pruned ``dense`` can add its kept rows
#: straight into the residual (``sparse_models.residual_add``). GPT-2 and Llama add in the block's own
#: forward and keep the scatter.
RESIDUAL_OUTPUT_TYPES = ("bert", "roberta", "xlm-roberta", "electra")


def default_target_modules(model_type: str) -> list[str]:
    """The FineGates default targets for ``model_type``, or a clear error naming the known types."""
    try:
        return list(DEFAULT_TARGET_MODULES[model_type])
    except KeyError:
        known = ", ".join(sorted(DEFAULT_TARGET_MODULES))
        raise ValueError(
            f"No default sparse-gate target_modules for model_type {model_type!r} (known: {known}); "
            "pass target_modules=[...] naming its linear layers."
        ) from None


def chains_for(model_type: str) -> tuple[Chain, ...]:
    """Chains for ``model_type``; unknown architectures get none (pruning then stays per-matrix)."""
    return CHAINS.get(model_type, ())


#: Architectures whose position ids start after the padding index (RoBERTa: padding_idx + 1).
_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert")


def max_input_length(model_config: Any, tokenizer: Any, requested: int | None = None, default: int = 512) -> int:
    """Tokens per input: ``requested`` (else ``default``), never more than the model's position table
    or the tokenizer's stated limit. A tokenizer without a limit (``model_max_length`` ~1e30) no longer
    lets inputs run past the position embeddings; an explicit ``requested`` over the model's limit is
    refused with the numbers, instead of an index error deep inside the model."""
    positions = getattr(model_config, "max_position_embeddings", None)
    if positions and getattr(model_config, "model_type", "") in _OFFSET_POSITIONS:
        positions -= (getattr(model_config, "pad_token_id", None) or 0) + 1
    if requested is not None and positions and requested > positions:
        raise UserInputError(f"max_length {requested} exceeds the {positions} positions of this "
                             f"{getattr(model_config, 'model_type', 'model')} model; use at most {positions}")
    tokenizer_limit = getattr(tokenizer, "model_max_length", None)
    limits = [requested or default, positions, tokenizer_limit if tokenizer_limit and tokenizer_limit < 10**6 else None]
    return min(x for x in limits if x)
