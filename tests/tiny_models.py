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


BUILDERS = {"bert": tiny_bert, "roberta": tiny_roberta, "gpt2": tiny_gpt2, "llama": tiny_llama}
TASK_TYPES = {"bert": "SEQ_CLS", "roberta": "SEQ_CLS", "gpt2": "CAUSAL_LM", "llama": "CAUSAL_LM"}


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
                         regression_center: float | None = None):
    """A tiny BERT classifier saved with the packaged MiniLM tokenizer (real files, no downloads).

    ``regression_center`` shifts a 1-label head so its scores sit inside STS-B's 0..5 range.
    """
    import json
    from pathlib import Path

    from transformers import AutoTokenizer

    from glue_sparse.experiments.packaged import minilm_path

    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
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
