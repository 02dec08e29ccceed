"""Local stand-ins for the Hub models of PEFT's generic tests: tiny BERT, RoBERTa, GPT-2 and Llama built
from configs, and PEFT's custom MLP, behind a ``from_pretrained`` as the tester expects."""

from __future__ import annotations

import os

import torch
import transformers
from torch import nn
from transformers import (
    BertConfig,
    BertModel,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    RobertaConfig,
    RobertaModel,
)

import sparse_models
from tests.tiny_models import VOCAB


class MLP(nn.Module):
    """PEFT's custom-model shape (``test_custom_models.MLP``): no transformers config, two linear layers."""

    def __init__(self) -> None:
        super().__init__()
        self.lin0 = nn.Linear(10, 20)
        self.relu = nn.ReLU()
        self.drop = nn.Dropout(0.5)
        self.lin1 = nn.Linear(20, 2)
        self.sm = nn.LogSoftmax(dim=-1)
        self.dtype = torch.float

    def forward(self, X):
        return self.sm(self.lin1(self.drop(self.relu(self.lin0(X.float())))))


def _gpt2() -> GPT2LMHeadModel:
    return GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                      bos_token_id=0, eos_token_id=0, tie_word_embeddings=False))


def _llama() -> LlamaForCausalLM:
    return LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                        num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64,
                                        bos_token_id=0, eos_token_id=0, pad_token_id=0, tie_word_embeddings=False))


def _encoder(config_cls, model_cls):
    def build():
        config = config_cls(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=64, max_position_embeddings=64)
        return model_cls(config)
    return build


BUILDERS = {
    "bert": _encoder(BertConfig, BertModel),
    "roberta": _encoder(RobertaConfig, RobertaModel),
    # decoders with untied output embeddings, as the Hub's tiny test models: PEFT's safe-merge check saves
    # the merged state dict with safetensors, which refuses tensors that share memory
    "gpt2": _gpt2,
    "llama": _llama,
    "MLP": MLP,
}
TASK_TYPES = {"bert": "FEATURE_EXTRACTION", "roberta": "FEATURE_EXTRACTION", "gpt2": "CAUSAL_LM",
              "llama": "CAUSAL_LM", "MLP": None}


class LocalModels:
    """``transformers_class`` for the tester: builds a model id from its config with a fixed seed (so
    every call gives the same weights, as the Hub would), or loads a folder that a test saved."""

    @classmethod
    def from_pretrained(cls, model_id: str, dtype=None, **kwargs):
        if os.path.isdir(model_id):
            config = transformers.AutoConfig.from_pretrained(model_id)
            name = config.architectures[0]
            model_cls = getattr(transformers, name, None) or getattr(sparse_models, name)
            return model_cls.from_pretrained(model_id, **kwargs)
        torch.manual_seed(0)
        model = BUILDERS[model_id]()
        if hasattr(model, "config"):  # as from_pretrained(model_id) sets them; PEFT's checks read them back
            model.config._name_or_path = model.name_or_path = model_id
        model = model.to(dtype) if dtype is not None else model
        return model.eval()  # as transformers' from_pretrained returns it
