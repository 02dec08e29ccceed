"""The model a fine-tuning run trains, per method: the classifier with its GLUE head, wrapped in LoRA or
sparse gates (or both), the magnitude-masked model, and the tokenised splits it trains on."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from glue_sparse.common.packaged import minilm_path
from glue_sparse.finetune.options import (
    BACKBONE_METHODS,
    LORA_METHODS,
    SOURCE_METHODS,
    FinetuneConfig,
)
from glue_sparse.finetune.teacher import teacher_logits, teacher_model
from glue_sparse_tasks.console import is_verbose
from glue_sparse_tasks import scoring
from glue_sparse_tasks.glue_tasks import GLUE_TASKS
from sparse_models.architectures import max_input_length
from sparse_models.removal import (
    OPEN_LOGIT,
    RemovalSchedule,
    close_lowest,
    freeze_gates,
    gate_logits,
    magnitude_scores,
    removal_gate_learning_rate,
)
from sparse_models.sparse_gates import SparseGatesConfig
from sparse_models.trainer import TEACHER_LOGITS, QuietProgressCallback, SparseGatesTrainer

TOKENIZED_COLUMNS = ("input_ids", "attention_mask", "token_type_ids", "labels")


def resolve_base_model(name: str | None) -> str:
    return name or minilm_path()


def tokenize(ds: Any, tokenizer: Any, task: str, max_length: int) -> Any:
    fields = GLUE_TASKS[task].text_fields

    def encode(batch: dict) -> dict:
        enc = tokenizer(*[batch[f] for f in fields], truncation=True, max_length=max_length)
        enc["labels"] = batch["label"]
        return enc

    keep = set(TOKENIZED_COLUMNS)
    return ds.map(encode, batched=True, remove_columns=[c for c in ds.column_names if c not in keep])


def build_model(config: FinetuneConfig, hp: dict[str, Any], base: str) -> Any:
    import peft
    from transformers import AutoModelForSequenceClassification

    spec = GLUE_TASKS[config.task]
    kwargs: dict[str, Any] = {"num_labels": spec.num_labels}
    if spec.is_regression:
        kwargs["problem_type"] = "regression"
    else:
        kwargs["id2label"] = dict(enumerate(spec.label_names))
        kwargs["label2id"] = {name: i for i, name in enumerate(spec.label_names)}
    model = AutoModelForSequenceClassification.from_pretrained(base, ignore_mismatched_sizes=True, **kwargs)
    if config.method in ("full", "magnitude"):
        return model

    # PEFT adds the classifier itself; gates+full trains every weight, the pooler included, without this
    head_extra = pooler_names(model) if hp.get("train_pooler", False) else None
    lora = None
    if config.method in LORA_METHODS:
        lora = peft.LoraConfig(task_type="SEQ_CLS", r=hp["lora_r"], lora_alpha=hp["lora_alpha"],
                               lora_dropout=hp["lora_dropout"],
                               modules_to_save=head_extra if config.method == "lora" else None)
    if config.method == "lora":
        return peft.get_peft_model(model, lora)
    gate_options = {"target_sparsity": hp["target_sparsity"]} if hp["recipe"] == "reference" else \
        {"target_removal": hp["target_removal"], "removal_score": hp["removal_score"]}
    gated = peft.get_peft_model(model, SparseGatesConfig(
        task_type="SEQ_CLS", sparsity_lambda=hp["sparsity_lambda"], reg_sigma=hp["reg_sigma"], lora_config=lora,
        modules_to_save=head_extra, bias_delta=config.method not in BACKBONE_METHODS,  # else biases train in place
        **gate_options))
    if config.method in BACKBONE_METHODS:
        train_every_weight(gated)
    return gated


def pooler_names(model: Any) -> list[str] | None:
    """The base model's pooler (BERT family), trained with the head by adapter methods; None where the
    architecture has none (RoBERTa's head holds its dense layer, decoders pool by the last token)."""
    body = getattr(model, model.base_model_prefix, None)
    return ["pooler"] if getattr(body, "pooler", None) is not None else None


def train_every_weight(model: Any) -> None:
    """Make every base weight trainable beside the gates, so the backbone fine-tunes under them (a
    closed row's output and a closed column's input are 0 whatever its weights do)."""
    for name, param in model.named_parameters():
        if "sparse_gates_" not in name and ".original_module." not in name:
            param.requires_grad_(True)


def gated_source(source: Path, target_removal: float) -> Any:
    """The full fine-tune ``source`` under sparse gates (biases in place, no bias deltas), every gate open
    and frozen: what magnitude pruning and mask search close gates in."""
    import peft
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(str(source))
    model = peft.get_peft_model(model, SparseGatesConfig(task_type="SEQ_CLS", target_removal=target_removal,
                                                         bias_delta=False))
    with torch.no_grad():
        for logit in gate_logits(model).values():
            logit.fill_(OPEN_LOGIT)
    freeze_gates(model)
    return model


def magnitude_model(source: Path, target_removal: float) -> Any:
    """The full fine-tune with gates fixed at 0/1 by structured magnitude, and every weight trainable,
    so re-fine-tuning keeps the masks (a closed row's output and a closed column's input are 0)."""
    model = gated_source(source, target_removal)
    close_lowest(model, target_removal, scores=magnitude_scores(model), snap_open=True)
    train_every_weight(model)
    return model


def source_model(config: FinetuneConfig, hp: dict[str, Any], source: Path) -> Any:
    """The model a run that builds on a full fine-tune starts from: magnitude-masked (and trainable), with
    every gate open for mask search to close, or (a gate method) the method's own model around that
    fine-tune's weights and trained head instead of the pre-trained model."""
    if config.method == "magnitude":
        return magnitude_model(source, hp["target_removal"])
    if config.method == "mask-search":
        return gated_source(source, hp["target_removal"])
    return build_model(config, hp, str(source))


def optimizer_steps(train_rows: int, config: FinetuneConfig, hp: dict[str, Any], world_size: int = 1) -> int:
    """Optimiser steps, as the Trainer counts them (for the budget-sized gate lr); data-parallel
    processes each take their own batch, so an epoch has ``world_size`` times fewer steps."""
    import math

    if config.max_steps:
        return config.max_steps
    per_epoch = max(1, math.ceil(train_rows / (hp["batch_size"] * world_size)) // config.gradient_accumulation_steps)
    return max(1, math.ceil(per_epoch * config.epochs))


def gate_learning_rate(hp: dict[str, Any], steps: int) -> float | None:
    """The gate logits' own lr: given, or the removal recipe's, sized to the removal steps."""
    if hp["gate_learning_rate"] is not None or hp["recipe"] != "removal":
        return hp["gate_learning_rate"]
    return removal_gate_learning_rate(RemovalSchedule(hp["target_removal"], steps))


def build_trainer(config: FinetuneConfig, hp: dict[str, Any], args: Any, source: Path | None,
                  callbacks: Sequence[Any], train: Any, validation: Any) -> tuple[Any, Any]:
    """(the Trainer, the tokenizer) of one run: the method's model (or the one built on the full fine-tune
    ``source``), the tokenised splits, and the gates' own learning rate sized to the run's steps."""
    from transformers import AutoTokenizer, DataCollatorWithPadding, set_seed
    from transformers.trainer_callback import ProgressCallback

    processes = args.distributed_state
    base = resolve_base_model(config.base_model)
    tokenizer = AutoTokenizer.from_pretrained(base)
    set_seed(config.seed)
    model = source_model(config, hp, source) if source else build_model(config, hp, base)
    inner = getattr(model, "base_model", model)
    max_length = max_input_length(getattr(inner, "config", model.config), tokenizer, default=config.max_length)
    train_tok = tokenize(train, tokenizer, config.task, max_length)
    eval_tok = tokenize(validation, tokenizer, config.task, max_length)
    distillation = hidden = None
    if config.distill:  # the teacher's logits ride in each training batch
        train_tok = train_tok.add_column(TEACHER_LOGITS, teacher_logits(config, train_tok, tokenizer, str(args.device)))
        distillation = (hp["distill_alpha"], hp["distill_temperature"])
    if hp.get("distill_hidden"):  # the teacher itself runs beside every step
        hidden = (teacher_model(config, str(args.device)), hp["distill_hidden"])
    trainer = SparseGatesTrainer(
        model=model, args=args, train_dataset=train_tok, eval_dataset=eval_tok,
        data_collator=DataCollatorWithPadding(tokenizer), processing_class=tokenizer,
        compute_metrics=glue_compute_metrics(config.task), callbacks=list(callbacks),
        gate_learning_rate=gate_learning_rate(hp, optimizer_steps(len(train_tok), config, hp, processes.num_processes)),
        masks_fixed=config.method in SOURCE_METHODS,  # a gate method over a full fine-tune runs its schedule
        backbone_trains=config.method in BACKBONE_METHODS,
        distillation=distillation,
        hidden_distillation=hidden,
    )
    if not is_verbose():
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(QuietProgressCallback)
    return trainer, tokenizer


def glue_compute_metrics(task: str) -> Callable[[Any], dict[str, float]]:
    """``compute_metrics`` for the Trainer: the shared scoring module on argmax (or regressed) outputs."""
    import numpy as np

    def compute(eval_pred: Any) -> dict[str, float]:
        logits, labels = eval_pred.predictions, eval_pred.label_ids
        logits = logits[0] if isinstance(logits, tuple) else logits
        if task == "stsb":
            preds = np.asarray(logits).reshape(-1).astype(float).tolist()
        else:
            preds = np.asarray(logits).argmax(-1).tolist()
        return scoring.task_metrics(task, preds, np.asarray(labels).reshape(-1).tolist())

    return compute
