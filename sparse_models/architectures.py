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
from sparse_models.pruned.residual_add import RESIDUAL_OUTPUT_TYPES

__all__ = ["Chain", "DEFAULT_TARGET_MODULES", "CHAINS", "ENCODER_LAYOUTS", "EncoderLayout", "RESIDUAL_OUTPUT_TYPES", "HEAD_NARROWING_TYPES",
           "activation_name", "architecture_markdown", "default_target_modules", "linear_layer_names", "chains_for",
           "max_input_length"]

@dataclass(frozen=True)
class Chain:
    """Module-name suffixes inside one block: ``producers`` feed ``consumer`` through a zero-preserving map."""

    producers: tuple[str, ...]
    consumer: str
    narrow: bool
    needs_zero_activation: bool
    mutual: bool = False


@dataclass(frozen=True)
class EncoderLayout:
    """The six matrices of one encoder layer, as module paths inside the layer (transformers' own names), and
    the config attribute that counts its attention heads: what gates target by default, what pruning chains
    and what mask search splits into heads and FFN channels. ``query_key_pairs``: a query dimension and the
    key dimension it multiplies can close together (not where relative positions are projected too)."""

    query: str
    key: str
    value: str
    attention_output: str
    ffn_input: str
    ffn_output: str
    heads_attribute: str = "num_attention_heads"
    query_key_pairs: bool = True

    @property
    def matrices(self) -> tuple[str, ...]:
        """In role order: query, key, value, attention output, FFN input, FFN output."""
        return self.query, self.key, self.value, self.attention_output, self.ffn_input, self.ffn_output

    def chains(self) -> tuple[Chain, ...]:
        """FFN input -> output (narrowed), value -> attention output (columns only), and query/key paired."""
        return (Chain((self.ffn_input,), self.ffn_output, narrow=True, needs_zero_activation=True),
                Chain((self.value,), self.attention_output, narrow=False, needs_zero_activation=False),
                *((Chain((self.key,), self.query, narrow=False, needs_zero_activation=False, mutual=True),)
                  if self.query_key_pairs else ()))


_BERT = EncoderLayout("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
                      "intermediate.dense", "output.dense")
#: Encoders whose layers hold six separate matrices (the one source of their names). ModernBERT fuses
#: q/k/v into ``Wqkv`` and its GLU's two inputs into ``Wi``, so it has no such layout: gates treat its
#: matrices one by one and mask search refuses it.
ENCODER_LAYOUTS: dict[str, EncoderLayout] = {
    "bert": _BERT,
    "roberta": _BERT,
    "xlm-roberta": _BERT,
    "electra": _BERT,
    # Disentangled attention also projects the relative-position embeddings with key_proj/query_proj
    # (share_att_key) or with their own pos_* projections, so no query/key pairing is claimed.
    "deberta-v2": EncoderLayout("attention.self.query_proj", "attention.self.key_proj", "attention.self.value_proj",
                                "attention.output.dense", "intermediate.dense", "output.dense",
                                query_key_pairs=False),
    "distilbert": EncoderLayout("attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin",
                                "ffn.lin1", "ffn.lin2", heads_attribute="n_heads"),
    # MPNet's relative-position bias is added to the scores, not projected: the q/k pairing holds.
    "mpnet": EncoderLayout("attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o",
                           "intermediate.dense", "output.dense"),
    # ALBERT shares one layer across depth: its modules (and so its gates and units) exist once.
    "albert": EncoderLayout("attention.query", "attention.key", "attention.value", "attention.dense", "ffn",
                            "ffn_output"),
}
_LLAMA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

# Module names as transformers' modeling files define them (modeling_<type>.py), attention projections
# and both FFN matrices (the FineGates choice); suffixes, as PEFT matches target_modules.
DEFAULT_TARGET_MODULES: dict[str, tuple[str, ...]] = {
    **{model_type: layout.matrices for model_type, layout in ENCODER_LAYOUTS.items()},
    "modernbert": ("attn.Wqkv", "attn.Wo", "mlp.Wi", "mlp.Wo"),
    "gpt2": ("c_attn", "c_proj", "c_fc"),
    "opt": ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"),
    "llama": _LLAMA_TARGETS,
    "mistral": _LLAMA_TARGETS,
    "qwen2": _LLAMA_TARGETS,
    "qwen3": _LLAMA_TARGETS,
    "gemma": _LLAMA_TARGETS,
    "gemma2": _LLAMA_TARGETS,
    "gemma3_text": _LLAMA_TARGETS,
    "phi3": ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"),
}


_LLAMA_CHAINS = (
    Chain(("mlp.gate_proj", "mlp.up_proj"), "mlp.down_proj", narrow=True, needs_zero_activation=True),
    Chain(("self_attn.v_proj",), "self_attn.o_proj", narrow=False, needs_zero_activation=False),
    # No query/key pairing here: rotary embeddings mix dimension d with d + head_dim/2 after the projection.
)

CHAINS: dict[str, tuple[Chain, ...]] = {
    **{model_type: layout.chains() for model_type, layout in ENCODER_LAYOUTS.items()},
    # ModernBERT and Phi-3 fuse q/k/v into one matrix and the GLU's two inputs into one (row j and row
    # j + intermediate both feed column j), which a one-to-one chain cannot express: per matrix only.
    "modernbert": (),
    "phi3": (),
    # GPT-2 fuses q, k and v into c_attn, so only its FFN chains.
    "gpt2": (Chain(("mlp.c_fc",), "mlp.c_proj", narrow=True, needs_zero_activation=True),),
    # OPT has learned positions (no rotary), so queries and keys pair as in BERT.
    "opt": (
        Chain(("fc1",), "fc2", narrow=True, needs_zero_activation=True),
        Chain(("self_attn.v_proj",), "self_attn.out_proj", narrow=False, needs_zero_activation=False),
        Chain(("self_attn.k_proj",), "self_attn.q_proj", narrow=False, needs_zero_activation=False, mutual=True),
    ),
    "llama": _LLAMA_CHAINS,
    "mistral": _LLAMA_CHAINS,
    "qwen2": _LLAMA_CHAINS,
    "qwen3": _LLAMA_CHAINS,
    "gemma": _LLAMA_CHAINS,  # GELU(gate) * up: GELU(0) = 0, as SiLU
    "gemma2": _LLAMA_CHAINS,
    "gemma3_text": _LLAMA_CHAINS,
}


#: Model types whose self-attention reshapes by ``attention_head_size`` and scales by ``scaling`` (two
#: attributes), so a pruned model can run narrower heads with the original scaling.
HEAD_NARROWING_TYPES = ("bert", "roberta", "xlm-roberta", "electra")

#: What a user should know about a type beyond its targets and chains (the architecture table's last column).
NOTES = {
    "deberta-v2": "DeBERTa-v2/v3; no query/key pairing (relative-position projections)",
    "albert": "one shared layer: one gate set per shared module, applied at every depth",
    "modernbert": "fused `Wqkv` and GLU `Wi`: gated and pruned per matrix, no chains",
    "gpt2": "fused `c_attn`: FFN chain only",
    "phi3": "fused `qkv_proj` and `gate_up_proj`: gated and pruned per matrix, no chains",
    "llama": "no query/key pairing (rotary)",
}


def architecture_markdown() -> str:
    """The architecture table of docs/architectures.md, rendered from this module (a test compares them)."""
    lines = ["| model_type | default target_modules | chains | residual add fused | heads narrowed | notes |",
             "|---|---|---|---|---|---|"]
    for model_type, targets in DEFAULT_TARGET_MODULES.items():
        chains = ", ".join(("q/k paired" if c.mutual else f"{'+'.join(c.producers)} → {c.consumer}")
                           for c in chains_for(model_type)) or "none (per matrix)"
        note = NOTES.get(model_type) or (NOTES["llama"] if chains_for(model_type) == CHAINS["llama"] else "")
        lines.append(f"| {model_type} | {', '.join(f'`{t}`' for t in targets)} | {chains} | "
                     f"{'yes' if model_type in RESIDUAL_OUTPUT_TYPES else 'no'} | "
                     f"{'yes' if model_type in HEAD_NARROWING_TYPES else 'no'} | {note} |")
    return "\n".join(lines)


#: Where a config names the FFN activation, for the types that do not call it ``hidden_act`` (GPT-2 and
#: OPT: ``activation_function``), as each modeling file reads it.
ACTIVATION_ATTRIBUTE = {"distilbert": "activation", "gemma2": "hidden_activation", "gemma3_text": "hidden_activation",
                        "modernbert": "hidden_activation"}


def activation_name(config: Any) -> str | None:
    """The FFN activation's ``ACT2FN`` name in ``config`` (None if it names none)."""
    attribute = ACTIVATION_ATTRIBUTE.get(getattr(config, "model_type", None))
    if attribute:
        return getattr(config, attribute, None)
    return getattr(config, "hidden_act", None) or getattr(config, "activation_function", None)


def default_target_modules(model_type: str, model: Any = None) -> list[str]:
    """The FineGates default targets for ``model_type``, or a one-line error naming the known types and,
    given the ``model``, the names of its linear layers (to copy into ``target_modules``)."""
    try:
        return list(DEFAULT_TARGET_MODULES[model_type])
    except KeyError:
        known = ", ".join(sorted(DEFAULT_TARGET_MODULES))
        layers = f"; its linear layers: {', '.join(linear_layer_names(model))}" if model is not None else ""
        raise ValueError(
            f"No default sparse-gate target_modules for model_type {model_type!r} (known: {known}); "
            f"pass target_modules=[...] naming its linear layers{layers}"
        ) from None


def linear_layer_names(model: Any) -> list[str]:
    """The distinct names of ``model``'s ``nn.Linear`` and GPT-2 ``Conv1D`` layers, with the block index
    dropped (``layer.0.attention.q_lin`` and ``layer.1.attention.q_lin`` -> ``attention.q_lin``), in
    model order: what ``target_modules`` matches by suffix."""
    from torch import nn
    from transformers.pytorch_utils import Conv1D

    names: dict[str, None] = {}
    for name, module in model.named_modules():
        if isinstance(module, (nn.Linear, Conv1D)):
            parts = name.split(".")
            digits = [i for i, part in enumerate(parts) if part.isdigit()]
            names[".".join(parts[digits[-1] + 1:]) if digits else name] = None
    return list(names)


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
