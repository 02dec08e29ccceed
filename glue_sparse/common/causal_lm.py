"""What every causal-LM workflow shares (perplexity, post-training, pre-training, speed): loading a causal LM
and finding its parts and device, the one definition of how text is packed into token streams and blocks,
document ranges, and the evaluation corpora."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence

import torch
from torch import nn
from transformers import AutoModelForCausalLM, AutoTokenizer

from glue_sparse.common.packaged import model_identity, smollm2_path
from glue_sparse_tasks.errors import UserInputError
from glue_sparse_tasks.text_corpora import load_c4_texts, load_wikitext2_pages
from sparse_models.checkpoints import check_model
from sparse_models.pruned.modeling_sparse_pruned import SparsePrunedPreTrainedModel


def causal_lm_parts(model: nn.Module) -> tuple[nn.Module, nn.Module, Any]:
    """(backbone returning hidden states, output head, config) of a causal LM, gated or pruned."""
    from peft import PeftModel

    if isinstance(model, PeftModel):
        model = model.get_base_model()
    if isinstance(model, SparsePrunedPreTrainedModel):
        model = model.model
    return model.get_decoder(), model.get_output_embeddings(), model.config


def model_device(model: nn.Module) -> torch.device:
    """Where the model's weights are: the protocols score there unless told otherwise."""
    return next(model.parameters()).device


def context_length(config: Any) -> int | None:
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        if getattr(config, name, None):
            return int(getattr(config, name))
    return None


def packed_token_stream(tokenizer: Any, texts: Iterable[str], limit: int | None = None) -> Iterator[int]:
    """Token ids of ``texts`` one document at a time, each followed by EOS (the causal-LM packing),
    stopping after ``limit`` ids. The single definition of how training and validation text is packed."""
    eos = tokenizer.eos_token_id
    emitted = 0
    for text in texts:
        for token in tokenizer(text, add_special_tokens=False).input_ids + ([eos] if eos is not None else []):
            if limit is not None and emitted >= limit:
                return
            emitted += 1
            yield token


def doc_range(text: str, flag: str = "--eval-docs") -> slice:
    """``START:END`` document indices (either end may be empty) as a slice."""
    try:
        lo, hi = (int(x) if x else None for x in text.split(":"))
    except ValueError:
        raise UserInputError(f"{flag}: expected START:END document indices, got {text!r}") from None
    return slice(lo, hi)


def corpus_texts(options: Any) -> tuple[list[str], Any]:
    """The corpus documents and their provenance, as ``options`` names them (``corpus``, ``data_dir``,
    ``c4_path``, ``hub``: a perplexity command's ``ProtocolOptions``)."""
    if options.corpus == "c4":
        return load_c4_texts(options.data_dir, options.c4_path, use_hub=options.hub)
    if options.corpus == "wikitext2":
        return load_wikitext2_pages(options.data_dir, use_hub=options.hub)
    raise UserInputError(f"--corpus {options.corpus!r}: expected c4 or wikitext2")


def load_causal_lm(name: str | None, device: str = "cpu") -> tuple[nn.Module, Any, str]:
    """(model, tokenizer, identity) of a causal LM on ``device`` (fp32 weights; ``--precision`` autocasts);
    None is the packaged SmolLM2-135M."""
    path = name or smollm2_path()
    check_model(path)  # a damaged weights file: one line naming it, not a failure deep in the load
    return (AutoModelForCausalLM.from_pretrained(path).to(device).eval(), AutoTokenizer.from_pretrained(path),
            model_identity(path))


def pack_blocks(tokenizer: Any, texts: Sequence[str], seqlen: int, max_blocks: int) -> list[list[int]]:
    """Documents joined with EOS (``packed_token_stream``) and cut into full ``seqlen`` blocks."""
    stream = list(packed_token_stream(tokenizer, texts, seqlen * max_blocks))
    return [stream[i:i + seqlen] for i in range(0, len(stream) - seqlen + 1, seqlen)]
