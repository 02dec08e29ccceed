"""Fine-tune an encoder on one GLUE task with one method, regime and seed; write what lm-eval reads.

Output of one run, ``<out>/<task>/``: the model (full, gates+full, magnitude: closed rows and columns folded
in as zeros) or adapter (lora, gates, gates+lora) with its
tokenizer, ``run.json`` (below), ``pruned/`` with ``prune=True``, and ``checkpoints/`` while training
(removed when the run completes). ``run.json`` holds method, regime, seed, every hyperparameter,
the data fingerprints, package versions, git commit, parameter accounting, train time, peak memory
and the validation metrics of every epoch.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any, Sequence

from glue_sparse.experiments.finetune_config import (
    BACKBONE_METHODS,
    LORA_METHODS,
    REMOVAL_GATE_TRAVEL,
    FinetuneConfig,
    FinetuneConfigError,
    magnitude_source_config,
)
from glue_sparse.experiments.packaged import minilm_path, model_identity
from glue_sparse.experiments.run_environment import (
    current_rss_bytes,
    git_state,
    package_versions,
    peak_rss_bytes,
    reset_peak_rss,
)
from glue_sparse_tasks.atomic import write_json_atomic
from glue_sparse_tasks.console import configure_console, is_verbose
from glue_sparse_tasks.data import load_glue_split, provenance
from glue_sparse_tasks.glue_tasks import GLUE_TASKS, evaluation_split
from glue_sparse_tasks.scoring import primary_metric
from sparse_models.accounting import parameter_accounting
from sparse_models.architectures import max_input_length
from sparse_models.checkpoints import PRUNED_SUBDIR, RUN_FILE
from sparse_models.removal import RemovalSchedule, close_lowest, freeze_gates, gate_fingerprint, magnitude_scores
from sparse_models.sparse_gates import SparseGatesConfig
from sparse_models.trainer import QuietProgressCallback, SparseGatesTrainer, glue_compute_metrics

MAGNITUDE_SOURCE = "magnitude-source"  # where a magnitude run without --from trains its full fine-tune
IDENTITY_FILE = "run_config.json"
CHECKPOINTS = "checkpoints"
TOKENIZED_COLUMNS = ("input_ids", "attention_mask", "token_type_ids", "labels")


class OutputDirError(FinetuneConfigError):
    """The output folder holds another run (or something else) and ``overwrite`` was not given."""


def resolve_base_model(name: str | None) -> str:

    return name or minilm_path()


def identity(config: FinetuneConfig) -> dict[str, Any]:
    """What makes two runs the same run: every resolved hyperparameter and the actual base model, named
    by name and weights sha256 (``model_identity``), never by the path it was loaded from."""

    out = config.resolved()
    out["base_model"] = model_identity(resolve_base_model(config.base_model))
    out.pop("report_to", None)  # where logs go does not change the run
    return out


def output_dir_state(task_dir: Path, ident: dict[str, Any], overwrite: bool, resume: bool) -> str:
    """'fresh', 'resume' or 'done' for ``task_dir``, without touching it; refuses a folder holding a
    different run (or anything else) unless ``overwrite``, and an unfinished one unless ``resume``."""
    if overwrite or not task_dir.exists() or not any(task_dir.iterdir()):
        return "fresh"
    if not (task_dir / IDENTITY_FILE).is_file():
        raise OutputDirError(f"{task_dir} is not empty and holds no {IDENTITY_FILE}; choose another --output "
                             "or pass --overwrite")
    existing = json.loads((task_dir / IDENTITY_FILE).read_text())
    differing = sorted(k for k in set(existing) | set(ident) if existing.get(k) != ident.get(k))
    if differing:
        details = ", ".join(f"{k}: {existing.get(k)!r} there vs {ident.get(k)!r} now" for k in differing)
        raise OutputDirError(f"{task_dir} already holds a different run ({details}); pass --overwrite to "
                             "replace it or choose another --output")
    if (task_dir / RUN_FILE).is_file():
        return "done"
    if not resume:
        raise OutputDirError(f"{task_dir} holds an unfinished run with these settings; pass --resume to "
                             "continue it from its last checkpoint or --overwrite to start again")
    return "resume"


def prepare_output_dir(task_dir: Path, ident: dict[str, Any], overwrite: bool, resume: bool) -> str:
    """``output_dir_state``, then clear (overwrite) or create the folder and record the run identity."""
    state = output_dir_state(task_dir, ident, overwrite, resume)
    if state == "fresh":
        if task_dir.exists():
            shutil.rmtree(task_dir)
        task_dir.mkdir(parents=True)
        write_json_atomic(task_dir / IDENTITY_FILE, ident)
    return state


def _tokenize(ds: Any, tokenizer: Any, task: str, max_length: int) -> Any:
    fields = GLUE_TASKS[task].text_fields

    def encode(batch: dict) -> dict:
        enc = tokenizer(*[batch[f] for f in fields], truncation=True, max_length=max_length)
        enc["labels"] = batch["label"]
        return enc

    keep = set(TOKENIZED_COLUMNS)
    return ds.map(encode, batched=True, remove_columns=[c for c in ds.column_names if c not in keep])


def _build_model(config: FinetuneConfig, hp: dict[str, Any], base: str) -> Any:
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
    head_extra = _pooler_names(model) if hp.get("train_pooler", False) else None
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
        _train_every_weight(gated)
    return gated


def _pooler_names(model: Any) -> list[str] | None:
    """The base model's pooler (BERT family), trained with the head by adapter methods; None where the
    architecture has none (RoBERTa's head holds its dense layer, decoders pool by the last token)."""
    body = getattr(model, model.base_model_prefix, None)
    return ["pooler"] if getattr(body, "pooler", None) is not None else None


def _train_every_weight(model: Any) -> None:
    """Make every base weight trainable beside the gates, so the backbone fine-tunes under them (a
    closed row's output and a closed column's input are 0 whatever its weights do)."""
    for name, param in model.named_parameters():
        if "sparse_gates_" not in name and ".original_module." not in name:
            param.requires_grad_(True)


def optimizer_steps(train_rows: int, config: FinetuneConfig, hp: dict[str, Any], world_size: int = 1) -> int:
    """Optimiser steps, as the Trainer counts them (for the budget-sized gate lr); data-parallel
    processes each take their own batch, so an epoch has ``world_size`` times fewer steps."""
    import math

    if config.max_steps:
        return config.max_steps
    per_epoch = max(1, math.ceil(train_rows / (hp["batch_size"] * world_size)) // config.gradient_accumulation_steps)
    return max(1, math.ceil(per_epoch * config.epochs))


def gate_learning_rate(hp: dict[str, Any], steps: int) -> float | None:
    """The gate logits' own lr: given, or REMOVAL_GATE_TRAVEL over the removal steps (removal recipe),
    so a gate can cross from open to closed within the budget whatever the budget is."""
    if hp["gate_learning_rate"] is not None or hp["recipe"] != "removal":
        return hp["gate_learning_rate"]

    return REMOVAL_GATE_TRAVEL / RemovalSchedule(hp["target_removal"], steps).final_step


def magnitude_source(config: FinetuneConfig, output_dir: Path, data_dir: str | None, use_hub: bool) -> Path:
    """The full fine-tune a magnitude run prunes: ``from_run`` (checked) or one trained here first."""
    if config.from_run is not None:
        root = Path(config.from_run)
        source = root if (root / RUN_FILE).is_file() else root / config.task
        if not (source / RUN_FILE).is_file():
            raise FinetuneConfigError(f"--from {config.from_run}: no finished run for task {config.task!r} "
                                      f"(looked for {source / RUN_FILE})")
        record = json.loads((source / RUN_FILE).read_text())
        if record.get("method") != "full" or record.get("task") != config.task:
            raise FinetuneConfigError(f"--from {source}: a magnitude run needs full fine-tuned weights for "
                                      f"{config.task!r}, but that folder holds a {record.get('method')!r} run "
                                      f"for {record.get('task')!r}")
        return source
    run_finetune(magnitude_source_config(config), output_dir / MAGNITUDE_SOURCE, data_dir=data_dir, resume=True,
                 use_hub=use_hub)
    return output_dir / MAGNITUDE_SOURCE / config.task


def _magnitude_model(source: Path, target_removal: float) -> Any:
    """The full fine-tune with gates fixed at 0/1 by structured magnitude, and every weight trainable,
    so re-fine-tuning keeps the masks (a closed row's output and a closed column's input are 0)."""
    import peft
    from transformers import AutoModelForSequenceClassification


    model = AutoModelForSequenceClassification.from_pretrained(str(source))
    model = peft.get_peft_model(model, SparseGatesConfig(task_type="SEQ_CLS", target_removal=target_removal,
                                                         bias_delta=False))  # the biases train in place
    close_lowest(model, target_removal, scores=magnitude_scores(model), snap_open=True)
    freeze_gates(model)
    _train_every_weight(model)
    return model


def _epoch_metrics(log_history: list[dict]) -> list[dict[str, Any]]:
    return [{k.removeprefix("eval_"): v for k, v in entry.items() if k.startswith("eval_") or k in ("epoch", "step")}
            for entry in log_history if any(k.startswith("eval_") for k in entry)]


def _saved_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file())


def run_finetune(
    config: FinetuneConfig,
    output_dir: str | Path,
    data_dir: str | None = None,
    overwrite: bool = False,
    resume: bool = False,
    callbacks: Sequence[Any] = (),
    keep_checkpoints: bool = False,
    use_hub: bool = True,
) -> dict[str, Any]:
    """Train one (task, method, regime, seed) into ``<output_dir>/<task>/`` and return its run record.

    A finished identical run is not repeated: its record is returned. ``resume=True`` continues an
    unfinished run from its last checkpoint. A run stopped by a callback returns
    ``{"status": "interrupted", ...}`` and writes no ``run.json``.
    """
    import torch
    from accelerate.utils import gather_object
    from transformers import AutoTokenizer, DataCollatorWithPadding, TrainingArguments, set_seed
    from transformers.trainer_callback import ProgressCallback



    hp = config.resolved()
    task_dir = Path(output_dir) / config.task
    ident = identity(config)
    if output_dir_state(task_dir, ident, overwrite, resume) == "done":
        return json.loads((task_dir / RUN_FILE).read_text())
    # data first: a missing or malformed split fails here, before any folder is made
    train = load_glue_split(config.task, "train", data_dir, limit=hp["train_limit"], use_hub=use_hub)
    eval_split = evaluation_split(config.task)
    validation = load_glue_split(config.task, eval_split, data_dir, use_hub=use_hub)
    source = magnitude_source(config, Path(output_dir), data_dir, use_hub) if config.method == "magnitude" else None
    metric = primary_metric(config.task)
    args = TrainingArguments(  # built first: its distributed state says which process this is
        output_dir=str(task_dir / CHECKPOINTS),
        per_device_train_batch_size=hp["batch_size"],
        per_device_eval_batch_size=config.eval_batch_size,
        learning_rate=hp["learning_rate"],
        weight_decay=hp["weight_decay"],
        num_train_epochs=config.epochs,
        max_steps=config.max_steps or -1,
        warmup_steps=hp["warmup_ratio"],  # a float in [0, 1) is a ratio of total steps
        lr_scheduler_type=hp["lr_scheduler"],
        max_grad_norm=hp["max_grad_norm"],
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        eval_strategy="epoch",
        save_strategy="steps" if config.save_steps else "epoch",
        save_steps=config.save_steps or 500,
        save_total_limit=2,
        load_best_model_at_end=config.model_selection == "best",
        metric_for_best_model=metric,
        greater_is_better=True,
        logging_steps=config.logging_steps,
        seed=config.seed,
        data_seed=config.seed,
        train_sampling_strategy="group_by_length",
        bf16=config.precision == "bf16",
        fp16=config.precision == "fp16",
        report_to=list(config.report_to) or "none",
        dataloader_num_workers=0,
        use_cpu=not torch.cuda.is_available(),  # so torchrun on CPU processes is data-parallel (gloo)
        # the removal schedule freezes the gates mid-run: DDP must accept parameters without gradients
        ddp_find_unused_parameters=config.method != "full" or None,
        disable_tqdm=False,
    )
    processes = args.distributed_state  # under torchrun / accelerate launch: this rank; else one process
    state = output_dir_state(task_dir, ident, overwrite, resume)  # every rank reads the folder first
    processes.wait_for_everyone()
    if processes.is_main_process:  # only the main process prepares and writes the run folder
        prepare_output_dir(task_dir, ident, overwrite, resume)
    processes.wait_for_everyone()
    base = resolve_base_model(config.base_model)
    tokenizer = AutoTokenizer.from_pretrained(base)
    set_seed(config.seed)
    model = _magnitude_model(source, hp["target_removal"]) if source else _build_model(config, hp, base)
    inner = getattr(model, "base_model", model)
    max_length = max_input_length(getattr(inner, "config", model.config), tokenizer, default=config.max_length)
    train_tok = _tokenize(train, tokenizer, config.task, max_length)
    eval_tok = _tokenize(validation, tokenizer, config.task, max_length)

    trainer = SparseGatesTrainer(
        model=model, args=args, train_dataset=train_tok, eval_dataset=eval_tok,
        data_collator=DataCollatorWithPadding(tokenizer), processing_class=tokenizer,
        compute_metrics=glue_compute_metrics(config.task), callbacks=list(callbacks),
        gate_learning_rate=gate_learning_rate(hp, optimizer_steps(len(train_tok), config, hp, processes.num_processes)),
        masks_fixed=source is not None,
        backbone_trains=config.method in BACKBONE_METHODS,
    )
    if not is_verbose():
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(QuietProgressCallback)
    one_shot = None
    if source is not None and state == "fresh":
        one_shot = {k.removeprefix("eval_"): v for k, v in trainer.evaluate().items() if k.startswith("eval_")}
    rss_before = current_rss_bytes()
    reset_peak_rss()
    start_step = 0
    last = None
    if state == "resume":
        from transformers.trainer_utils import get_last_checkpoint

        checkpoints = task_dir / CHECKPOINTS
        last = get_last_checkpoint(str(checkpoints)) if checkpoints.is_dir() else None
        if last is None:
            logging.getLogger("glue_sparse").info(f"{task_dir}: stopped before its first checkpoint; starting it again")
        else:
            start_step = int(Path(last).name.split("-")[-1])
    started = time.perf_counter()
    train_output = trainer.train(resume_from_checkpoint=last)
    train_seconds = time.perf_counter() - started
    peak = peak_rss_bytes()
    steps_here = trainer.state.global_step - start_step
    planned = trainer.state.max_steps
    if trainer.state.global_step < planned:
        return {"status": "interrupted", "task": config.task, "global_step": trainer.state.global_step,
                "max_steps": planned}

    epochs = _epoch_metrics(trainer.state.log_history)
    eval_seconds = sum(e.get("runtime", 0.0) for e in epochs if e.get("step", 0) > start_step)
    step_seconds = max(train_seconds - eval_seconds, 0.0)
    last_eval = epochs[-1] if epochs else {}
    if config.model_selection == "last" and last_eval.get("step") == trainer.state.global_step:
        final = {k: v for k, v in last_eval.items() if k != "step"}  # the final model was just evaluated
    else:
        final = {k.removeprefix("eval_"): v for k, v in trainer.evaluate().items() if k.startswith("eval_")}
    model = trainer.model.eval()
    # gates+full and magnitude train every weight (magnitude under fixed masks): count what trained, not
    # the adapter; they are saved as plain models with the closed rows and columns folded in
    whole = config.method in BACKBONE_METHODS
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad) if whole else None
    accounting = parameter_accounting(model, trainable_parameters=trained)
    gate_prints = gather_object([gate_fingerprint(model)]) if config.method != "full" else None
    if config.method == "full":
        trainer.save_model(str(task_dir))  # the Trainer saves on the main process only
    if not processes.is_main_process:
        processes.wait_for_everyone()  # the main process writes the run folder; wait for it
        return json.loads((task_dir / RUN_FILE).read_text())
    if whole:
        pruned = copy.deepcopy(model).merge_and_unload() if config.prune else None
        model.merge_and_unload(prune=False).save_pretrained(str(task_dir))  # masks folded: a plain HF model
        tokenizer.save_pretrained(str(task_dir))
    elif config.method != "full":
        model.save_pretrained(str(task_dir))
        tokenizer.save_pretrained(str(task_dir))
    record: dict[str, Any] = {
        "status": "complete",
        "task": config.task,
        "method": config.method,
        "regime": config.regime,
        "seed": config.seed,
        "num_labels": GLUE_TASKS[config.task].num_labels,
        "base_model": ident["base_model"],
        "hyperparameters": ident,
        "model_selection": config.model_selection,
        "selection_is_optimistic": config.model_selection == "best",
        "primary_metric": metric,
        "data": {"train": provenance(train).to_dict(), "validation": provenance(validation).to_dict()},
        "versions": package_versions(),
        "git": git_state(),
        "device": str(trainer.args.device),
        "threads": torch.get_num_threads(),
        "accounting": accounting.to_dict(),
        "saved_bytes": _saved_bytes(task_dir),
        "train_seconds": train_seconds,
        "train_runtime_reported": train_output.metrics.get("train_runtime"),
        "train_steps": trainer.state.global_step,
        "steps_this_process": steps_here,
        "eval_seconds_during_training": eval_seconds,
        "seconds_per_step": step_seconds / steps_here if steps_here else None,
        "resumed_from_step": start_step or None,
        "peak_rss_bytes": peak,
        "rss_before_training_bytes": rss_before,
        "epochs": epochs,
        "final_metrics": final,
        "final_score": final.get(metric),
        "gate_learning_rate": trainer.gate_learning_rate,
        "world_size": processes.num_processes,
        "effective_batch_size": hp["batch_size"] * config.gradient_accumulation_steps * processes.num_processes,
        "gate_fingerprint_by_rank": gate_prints,
    }
    if source is not None:
        record["magnitude"] = {"source": os.path.relpath(source, task_dir), "one_shot_metrics": one_shot,
                               "refinetune_steps": trainer.state.global_step}
    if config.prune:
        pruned = pruned if whole else model.merge_and_unload()
        pruned.save_pretrained(str(task_dir / PRUNED_SUBDIR))
        tokenizer.save_pretrained(str(task_dir / PRUNED_SUBDIR))
        record["pruned"] = {"path": "pruned", "saved_bytes": _saved_bytes(task_dir / PRUNED_SUBDIR),
                            "accounting": parameter_accounting(pruned).to_dict()}
    if not keep_checkpoints:
        shutil.rmtree(task_dir / CHECKPOINTS, ignore_errors=True)
    write_json_atomic(task_dir / RUN_FILE, record)
    processes.wait_for_everyone()
    return record


def main(argv: Sequence[str] | None = None) -> int:
    """Worker entry point: ``python -m glue_sparse.experiments.finetune CONFIG_JSON OUTPUT [options]``.

    Used by ``glue-sparse bench`` to give every run its own process (and so its own peak RSS).
    """
    import argparse

    parser = argparse.ArgumentParser(prog="python -m glue_sparse.experiments.finetune")
    parser.add_argument("config", help="FinetuneConfig fields as a JSON object")
    parser.add_argument("output")
    parser.add_argument("--data-dir")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--no-hub", dest="hub", action="store_false")
    args = parser.parse_args(argv)

    configure_console()  # as the command that started this worker was configured (-v or not)
    record = run_finetune(FinetuneConfig(**json.loads(args.config)), args.output, data_dir=args.data_dir,
                          resume=args.resume, use_hub=args.hub)
    return 0 if record["status"] == "complete" else 3


if __name__ == "__main__":
    import sys

    sys.exit(main())
