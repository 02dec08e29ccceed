"""Sparse-gate post-training of a causal LM on plain text (gates only), with the fine-tuning Trainer."""

from __future__ import annotations

import copy
import time
from typing import Any, Sequence

import torch

from .accounting import parameter_accounting


def pack_blocks(tokenizer: Any, texts: Sequence[str], seqlen: int, max_blocks: int) -> list[list[int]]:
    """Documents joined with EOS and cut into full ``seqlen`` blocks (the usual causal-LM packing)."""
    eos = tokenizer.eos_token_id
    blocks: list[list[int]] = []
    buffer: list[int] = []
    for text in texts:
        buffer += tokenizer(text, add_special_tokens=False).input_ids + ([eos] if eos is not None else [])
        while len(buffer) >= seqlen and len(blocks) < max_blocks:
            blocks.append(buffer[:seqlen])
            buffer = buffer[seqlen:]
        if len(blocks) >= max_blocks:
            break
    return blocks


def posttrain_gates(
    model: Any,
    tokenizer: Any,
    train_texts: Sequence[str],
    output_dir: str,
    target_sparsity: float | None = None,
    steps: int = 100,
    seqlen: int = 256,
    batch_size: int = 4,
    learning_rate: float | None = 1e-3,
    sparsity_lambda: float = 50.0,
    reg_sigma: float | None = None,
    seed: int = 0,
    target_removal: float | None = None,
) -> tuple[Any, dict[str, Any]]:
    """Inject gates into ``model`` (a copy is not made), train only the gates; return (peft model, info).

    ``target_removal`` (instead of ``target_sparsity``) removes that share of gated weights exactly, on
    the removal schedule; ``learning_rate`` None then means REMOVAL_GATE_TRAVEL over the removal steps.
    """
    import datasets
    import peft
    from transformers import DataCollatorForLanguageModeling, TrainingArguments, set_seed

    from .sparse_gates import SparseGatesConfig
    from .trainer import SparseGatesTrainer

    set_seed(seed)
    blocks = pack_blocks(tokenizer, train_texts, seqlen, steps * batch_size)
    if not blocks:
        raise ValueError(f"the training texts give no full block of {seqlen} tokens")
    if (target_sparsity is None) == (target_removal is None):
        raise ValueError("give exactly one of target_sparsity (reference regulariser) and target_removal")
    # only gates train here, so nothing is left to recover after the removal: make it final at the end
    options = {"target_removal": target_removal, "removal_end": 1.0} if target_removal is not None else \
        {"target_sparsity": target_sparsity}
    gates_config = SparseGatesConfig(task_type="CAUSAL_LM", sparsity_lambda=sparsity_lambda, reg_sigma=reg_sigma,
                                     **options)
    gated = peft.get_peft_model(model, gates_config)
    if learning_rate is None:
        from .finetune_config import REMOVAL_GATE_TRAVEL
        from .removal import RemovalSchedule

        schedule = RemovalSchedule(target_removal or 0.0, steps, end=gates_config.removal_end)
        learning_rate = REMOVAL_GATE_TRAVEL / schedule.final_step
    if tokenizer.pad_token is None:
        tokenizer = copy.copy(tokenizer)
        tokenizer.pad_token = tokenizer.eos_token
    args = TrainingArguments(output_dir=output_dir, max_steps=steps, per_device_train_batch_size=batch_size,
                             learning_rate=learning_rate, warmup_steps=0.06, logging_steps=max(1, steps // 10),
                             save_strategy="no", report_to="none", seed=seed, dataloader_num_workers=0)
    trainer = SparseGatesTrainer(model=gated, args=args,
                                 train_dataset=datasets.Dataset.from_dict({"input_ids": blocks}),
                                 data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False))
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    gated.eval()
    info = {"steps": steps, "seqlen": seqlen, "batch_size": batch_size, "train_blocks": len(blocks),
            "train_tokens": len(blocks) * seqlen, "learning_rate": learning_rate, "target_sparsity": target_sparsity,
            "target_removal": target_removal,
            "sparsity_lambda": sparsity_lambda, "reg_sigma": reg_sigma, "seed": seed, "train_seconds": seconds,
            "seconds_per_step": seconds / steps, "accounting": parameter_accounting(gated).to_dict(),
            "loss_log": [e for e in trainer.state.log_history if "loss" in e]}
    return gated, info


@torch.inference_mode()
def tokens_per_second(models: Sequence[Any], tokenizer: Any, texts: Sequence[str], seqlen: int = 256,
                      batch_size: int = 4, rounds: int = 3) -> list[float]:
    """CPU forward tokens/s of each model on the same packed batches (interleaved, median)."""
    from .speed import time_forwards

    blocks = pack_blocks(tokenizer, texts, seqlen, batch_size * 2)
    batches = [{"input_ids": torch.tensor(blocks[i:i + batch_size])} for i in range(0, len(blocks), batch_size)]
    seconds = time_forwards(models, batches, rounds)
    tokens = sum(b["input_ids"].numel() for b in batches)
    return [tokens / s for s in seconds]
