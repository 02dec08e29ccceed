"""``SparsePrunedConfig``: the configuration of a physically pruned model, beside its modeling module."""

from __future__ import annotations

from typing import Any

from transformers import AutoConfig, PretrainedConfig

HEADS = ("sequence_classification", "causal_lm", "base")


class SparsePrunedConfig(PretrainedConfig):
    """Wraps the original architecture's config and records, per pruned layer, what was kept.

    ``pruned_modules`` maps a module name to ``{out_features, in_features, kept_out, kept_in,
    gather_in, scatter_out, bias, gated}``. ``dense_parameters`` is the parameter count before
    pruning, ``trainable_parameters`` the count trained before pruning and ``gate_counts`` the
    closed/total rows and columns of the gates, so the accounting of a saved pruned model needs
    nothing but this file. ``attention_head_sizes`` maps a self-attention
    module narrowed per head to its reduced head sizes, ``{"query_key": a, "value": b}`` (one int for
    both in checkpoints saved before the two could differ). ``attention_heads`` maps a Llama-style
    attention whose whole query heads were removed to, per kept query head, the index of its key/value
    head among the kept ones (``sparse_models.pruned.pruned_attention``). A record's ``added_bias`` marks a bias
    the pruning method added (FLAP's compensation), counted as added parameters.
    """

    model_type = "sparse_gated"  # kept from before the rename, so every saved pruned checkpoint still loads
    has_no_defaults_at_init = True

    def __init__(
        self,
        base_config: dict[str, Any] | None = None,
        head: str = "base",
        pruned_modules: dict[str, dict[str, Any]] | None = None,
        dense_parameters: int = 0,
        gate_counts: dict[str, int] | None = None,
        trainable_parameters: int | None = None,
        attention_head_sizes: dict[str, Any] | None = None,
        attention_heads: dict[str, list[int]] | None = None,
        **kwargs: Any,
    ) -> None:
        if head not in HEADS:
            raise ValueError(f"SparsePrunedConfig.head must be one of {HEADS}, got {head!r}")
        # the architecture, not where the dense model was loaded from: a saved folder (an older one re-saved
        # too) names no path of the machine that made it
        self.base_config = {k: v for k, v in (base_config or {}).items() if k != "_name_or_path"}
        self.head = head
        self.pruned_modules = dict(pruned_modules or {})
        self.dense_parameters = int(dense_parameters)
        self.gate_counts = dict(gate_counts or {})
        self.trainable_parameters = trainable_parameters
        self.attention_head_sizes = dict(attention_head_sizes or {})
        self.attention_heads = {k: [int(i) for i in v] for k, v in (attention_heads or {}).items()}
        if self.base_config:
            for key in ("id2label", "label2id", "problem_type", "pad_token_id", "eos_token_id", "bos_token_id"):
                if key in self.base_config and key not in kwargs:
                    kwargs[key] = self.base_config[key]
            kwargs.setdefault("tie_word_embeddings", self.base_config.get("tie_word_embeddings", False))
        super().__init__(**kwargs)

    def inner_config(self) -> PretrainedConfig:
        """The original architecture's config object (BERT, Llama, ...)."""
        if not self.base_config or "model_type" not in self.base_config:
            raise ValueError("SparsePrunedConfig.base_config is empty or lacks 'model_type'")
        base = dict(self.base_config)
        return AutoConfig.for_model(base.pop("model_type"), **base)
