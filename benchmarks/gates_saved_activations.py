"""Bytes autograd keeps for backward in one MiniLM training step: full, LoRA, gates (lean and plain).

Measures the two sides of the gates-vs-LoRA memory target in one run and prints the ratios; peak RSS
of real fine-tuning runs is in the bench store (``benchmarks/results/minilm_limited/``).

    python benchmarks/gates_saved_activations.py [--batch 8] [--length 128]
"""

from __future__ import annotations

import argparse

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForSequenceClassification

from glue_sparse.common.packaged import minilm_path
from sparse_models import SparseGatesConfig


def saved_mib(kind: str, batch: dict[str, torch.Tensor], lean: bool = True) -> float:
    """MiB of distinct non-parameter tensors saved for backward during one forward + backward."""
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(minilm_path(), num_labels=2)
    if kind == "lora":
        model = get_peft_model(model, LoraConfig(task_type="SEQ_CLS", r=8, lora_alpha=16, lora_dropout=0.1,
                                                 target_modules=["query", "value"]))
    elif kind == "gates":
        model = get_peft_model(model, SparseGatesConfig(task_type="SEQ_CLS"))
    model.train()
    for module in model.modules():
        if hasattr(module, "lean_backward"):
            module.lean_backward = lean
    params = {p.data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.data_ptr() not in params:
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(**batch).logits.sum().backward()
    return sum(storages.values()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    args = parser.parse_args()
    batch = {"input_ids": torch.randint(5, 9000, (args.batch, args.length), generator=torch.Generator().manual_seed(0)),
             "attention_mask": torch.ones(args.batch, args.length, dtype=torch.long)}
    sizes = {"full": saved_mib("full", batch), "lora": saved_mib("lora", batch),
             "gates (lean backward)": saved_mib("gates", batch),
             "gates (plain composition)": saved_mib("gates", batch, lean=False)}
    for name, mib in sizes.items():
        print(f"{name:28s} {mib:8.1f} MiB")
    print(f"gates lean / plain: {sizes['gates (lean backward)'] / sizes['gates (plain composition)']:.3f}; "
          f"gates lean / LoRA: {sizes['gates (lean backward)'] / sizes['lora']:.3f}")


if __name__ == "__main__":
    main()
