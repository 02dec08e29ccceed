"""Tiny random-weight transformers models built from configs (no downloads), one per architecture."""

from __future__ import annotations

import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    RobertaConfig,
    RobertaForSequenceClassification,
)

VOCAB = 100


def tiny_bert(num_labels: int = 2, seed: int = 0, hidden: int = 32) -> BertForSequenceClassification:
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64, num_labels=num_labels)
    return BertForSequenceClassification(config).eval()


def tiny_roberta(num_labels: int = 2, seed: int = 0) -> RobertaForSequenceClassification:
    torch.manual_seed(seed)
    config = RobertaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=64, max_position_embeddings=64, num_labels=num_labels)
    return RobertaForSequenceClassification(config).eval()


def tiny_gpt2(seed: int = 0) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                        bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config).eval()


def tiny_llama(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64,
                         tie_word_embeddings=True, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    return LlamaForCausalLM(config).eval()


_SMALL = {"vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
          "intermediate_size": 64, "max_position_embeddings": 64}
_DECODER = {**_SMALL, "num_key_value_heads": 2, "head_dim": 8, "tie_word_embeddings": True, "bos_token_id": 0,
            "eos_token_id": 0, "pad_token_id": 0}
#: model_type -> (config class name, model class name, config kwargs): the architectures issue #40 added,
#: each at the shape of its family (DeBERTa-v3: relative attention with shared keys; ALBERT: one shared layer)
MORE_ARCHITECTURES = {
    "deberta-v2": ("DebertaV2Config", "DebertaV2ForSequenceClassification",
                   {**_SMALL, "relative_attention": True, "position_buckets": 16, "pos_att_type": ["p2c", "c2p"],
                    "norm_rel_ebd": "layer_norm", "share_att_key": True}),
    "distilbert": ("DistilBertConfig", "DistilBertForSequenceClassification",
                   {"vocab_size": VOCAB, "dim": 32, "n_layers": 2, "n_heads": 4, "hidden_dim": 64,
                    "max_position_embeddings": 64}),
    "mpnet": ("MPNetConfig", "MPNetForSequenceClassification", _SMALL),
    "albert": ("AlbertConfig", "AlbertForSequenceClassification", {**_SMALL, "embedding_size": 16}),
    "modernbert": ("ModernBertConfig", "ModernBertForSequenceClassification",
                   {**_SMALL, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "cls_token_id": 1,
                    "sep_token_id": 2, "global_attn_every_n_layers": 2, "local_attention": 8}),
    "opt": ("OPTConfig", "OPTForCausalLM",
            {"vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "ffn_dim": 64,
             "max_position_embeddings": 64, "word_embed_proj_dim": 32, "bos_token_id": 0, "eos_token_id": 0,
             "pad_token_id": 1}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", _DECODER),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", _DECODER),
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM", {**_DECODER, "sliding_window": 8}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {**_DECODER, "head_dim": None}),
}


def tiny_model(model_type: str, seed: int = 0, num_labels: int = 2, vocab_size: int = VOCAB) -> torch.nn.Module:
    """A tiny random model of one of ``MORE_ARCHITECTURES`` (eval mode)."""
    import transformers

    config_name, model_name, kwargs = MORE_ARCHITECTURES[model_type]
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    kwargs["vocab_size"] = vocab_size
    config = getattr(transformers, config_name)(**kwargs)
    if model_name.endswith("SequenceClassification"):
        config.num_labels = num_labels
    torch.manual_seed(seed)
    return getattr(transformers, model_name)(config).eval()


BUILDERS = {"bert": tiny_bert, "roberta": tiny_roberta, "gpt2": tiny_gpt2, "llama": tiny_llama,
            **{t: (lambda t=t: tiny_model(t)) for t in MORE_ARCHITECTURES}}
TASK_TYPES = {"bert": "SEQ_CLS", "roberta": "SEQ_CLS", "gpt2": "CAUSAL_LM", "llama": "CAUSAL_LM",
              **{t: "SEQ_CLS" if m.endswith("SequenceClassification") else "CAUSAL_LM"
                 for t, (_, m, _) in MORE_ARCHITECTURES.items()}}


def set_gate_pattern(peft_model, closed: float = 0.4, fractional: float = 0.2, seed: int = 1) -> None:
    """Close a share of rows/columns (eval gate exactly 0) and make another share fractional."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in peft_model.base_model.gated_layers().values():
            for logits in (layer.sparse_gates_row["default"], layer.sparse_gates_col["default"]):
                draw = torch.rand(logits.shape, generator=generator)
                logits[draw < closed] = -3.0  # tanh(-3) + 0.5 < 0 -> gate 0
                logits[(draw >= closed) & (draw < closed + fractional)] = -0.2  # gate ~0.30


def save_tiny_classifier(folder, num_labels: int, seed: int = 0, task: str | None = None,
                         regression_center: float | None = None, layers: int = 2):
    """A tiny BERT classifier saved with the packaged MiniLM tokenizer (real files, no downloads).

    ``regression_center`` shifts a 1-label head so its scores sit inside STS-B's 0..5 range.
    """
    import json
    from pathlib import Path

    from transformers import AutoTokenizer

    from glue_sparse.common.packaged import minilm_path

    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=layers,
                        num_attention_heads=4, intermediate_size=64, max_position_embeddings=128,
                        num_labels=num_labels)
    model = BertForSequenceClassification(config).eval()
    if regression_center is not None:
        with torch.no_grad():
            model.classifier.bias.fill_(regression_center)
            model.classifier.weight.mul_(20.0)
    folder = Path(folder)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if task:
        (folder / "run.json").write_text(json.dumps({"task": task, "num_labels": num_labels}))
    return folder


def save_tiny_encoder(folder, model_type: str, num_labels: int = 2, seed: int = 0):
    """A tiny random encoder of one of ``MORE_ARCHITECTURES`` saved with the packaged MiniLM tokenizer
    (its vocabulary sizes the embeddings; the special ids are the tokenizer's), ready for ``--model``."""
    from pathlib import Path

    from transformers import AutoTokenizer

    from glue_sparse.common.packaged import minilm_path

    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    model = tiny_model(model_type, seed=seed, num_labels=num_labels, vocab_size=tokenizer.vocab_size)
    for name in ("pad", "cls", "sep"):
        if hasattr(model.config, f"{name}_token_id"):
            setattr(model.config, f"{name}_token_id", getattr(tokenizer, f"{name}_token_id"))
    folder = Path(folder)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_tiny_llama_with_tokenizer(folder, corpus: list[str], vocab_size: int = 300, seed: int = 0):
    """A tiny random Llama plus a byte-level BPE tokenizer trained on ``corpus`` (no downloads)."""
    from pathlib import Path

    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(corpus, vocab_size=vocab_size, special_tokens=["<|endoftext|>"])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|endoftext|>", eos_token="<|endoftext|>")
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=64, max_position_embeddings=128,
                         tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    model = LlamaForCausalLM(config).eval()
    folder = Path(folder)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def write_text_corpora(root, c4_docs: list[str], wikitext: str):
    """A data folder as the perplexity code reads it: ``c4/validation_sample.jsonl`` and ``wikitext2/test.txt``."""
    import json
    from pathlib import Path

    root = Path(root)
    (root / "c4").mkdir(parents=True, exist_ok=True)
    (root / "c4" / "validation_sample.jsonl").write_text(
        "".join(json.dumps({"text": t, "url": "u", "timestamp": "t"}) + "\n" for t in c4_docs))
    (root / "wikitext2").mkdir(exist_ok=True)
    (root / "wikitext2" / "test.txt").write_text(wikitext)
    return root
