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
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from glue_sparse.common.model_card import TRAINER_SOURCE, write_run_cards
from glue_sparse.common.run_environment import git_state, invoking_command, measured_stage, package_versions
from glue_sparse.common.packaged import model_identity
from glue_sparse.finetune.elapsed import ElapsedOnSave, seconds_before
from glue_sparse.finetune.mask_search import (
    START_MASK_FILE,
    check_architecture,
    search_and_measure,
    start_closed,
    start_mask_outcome,
)
from glue_sparse.finetune.models import build_trainer, resolve_base_model
from glue_sparse.finetune.options import (
    ADAPTER_METHODS,
    SOURCE_METHODS,
    FinetuneConfig,
    FinetuneConfigError,
    builds_on_run,
    full_source_config,
    saves_whole_model,
)
from glue_sparse.finetune.run_dir import CHECKPOINTS, MAGNITUDE_SOURCE, identity, output_dir_state, prepare_output_dir
from glue_sparse.finetune.teacher import check_teacher
from glue_sparse_tasks.atomic import write_json_atomic
from glue_sparse_tasks.console import configure_console
from glue_sparse_tasks.data import load_glue_split, provenance
from glue_sparse_tasks.glue_tasks import GLUE_TASKS, evaluation_split
from glue_sparse_tasks.scoring import primary_metric
from sparse_models.accounting import parameter_accounting
from sparse_models.checkpoints import PRUNED_SUBDIR, RUN_FILE, check_complete, check_model
from sparse_models.runtime.devices import trainer_arguments
from sparse_models.removal import gate_fingerprint



def magnitude_source(config: FinetuneConfig, output_dir: Path, data_dir: str | None, use_hub: bool) -> Path:
    """The full fine-tune a run builds on (magnitude and mask-search prune it, a gate method with ``start_from``
    starts from it): ``from_run`` (checked) or one trained here first."""
    if config.from_run is not None:
        root = Path(config.from_run)
        source = root if (root / RUN_FILE).is_file() else root / config.task
        if not (source / RUN_FILE).is_file():
            raise FinetuneConfigError(f"--from {config.from_run}: no finished run for task {config.task!r} "
                                      f"(looked for {source / RUN_FILE})")
        check_source(config, source)
        check_complete(source)
        return source
    return full_source(config, output_dir, data_dir, use_hub)


def check_source(config: FinetuneConfig, source: Path) -> None:
    """Refuse, in one line and before this run's folder exists, a ``--from`` run that is not a full fine-tune of
    this task, of this run's base model, with this task's label count."""
    record = json.loads((source / RUN_FILE).read_text())
    if record.get("method") != "full" or record.get("task") != config.task:
        raise FinetuneConfigError(f"--from {source}: a {config.method} run needs full fine-tuned weights for "
                                  f"{config.task!r}, but that folder holds a {record.get('method')!r} run "
                                  f"for {record.get('task')!r}")
    expected = GLUE_TASKS[config.task].num_labels
    if record.get("num_labels", expected) != expected:
        raise FinetuneConfigError(f"--from {source}: {record.get('num_labels')} label(s), but {config.task} needs "
                                  f"{expected}")
    ours, theirs = model_identity(resolve_base_model(config.base_model)), record.get("base_model")
    if theirs and _weight_hashes(theirs) != _weight_hashes(ours):  # a copied folder keeps its weights' hashes
        raise FinetuneConfigError(f"--from {source}: fine-tuned from {theirs}, but this run's model is {ours}; "
                                  "pass the same --model")


def _weight_hashes(identity: str) -> set[str]:
    """The sha256 digests a model identity names (its name and folder left aside)."""
    return set(re.findall(r"sha256[ :]([0-9a-f]{64})", identity)) or {identity}


def full_source(config: FinetuneConfig, output_dir: Path, data_dir: str | None, use_hub: bool) -> Path:
    """``full_source_config(config)`` trained (or found finished) under ``<output_dir>/magnitude-source/``."""
    run_finetune(full_source_config(config), output_dir / MAGNITUDE_SOURCE, data_dir=data_dir, resume=True,
                 use_hub=use_hub)
    return output_dir / MAGNITUDE_SOURCE / config.task


def _with_teacher(config: FinetuneConfig, output_dir: Path, data_dir: str | None, use_hub: bool) -> FinetuneConfig:
    """A distilled run's config with its teacher: given, or the full fine-tune trained (or found) first;
    checked before this run's folder or model exists."""
    if not config.distill:
        return config
    if not config.teacher:
        config = replace(config, teacher=str(full_source(config, output_dir, data_dir, use_hub)))
    check_teacher(config, resolve_base_model(config.base_model))
    return config


def _sources(config: FinetuneConfig, output_dir: Path, data_dir: str | None,
             use_hub: bool) -> tuple[FinetuneConfig, Path | None]:
    """(the config with its teacher, the full fine-tune a magnitude or mask-search run prunes): each found,
    or trained first, and checked before this run's folder exists."""
    check_model(resolve_base_model(config.base_model))  # damaged weights: one line, before any folder is made
    config = _with_teacher(config, output_dir, data_dir, use_hub)
    if "mask-search" in (config.method, config.start_from):
        check_architecture(config, resolve_base_model(config.base_model))
    return config, magnitude_source(config, output_dir, data_dir, use_hub) if builds_on_run(config) else None


def _built_on(config: FinetuneConfig, source: Path | None, task_dir: Path, model: Any,
              method_record: dict[str, Any]) -> dict[str, Any]:
    """run.json's record of the full fine-tune a run was built on: magnitude and mask-search (under their
    method's name) with what the method did to it, a gate method's ``start`` with the mask it started from
    and how much of it the trained gates kept."""
    if source is None:
        return {}
    where = os.path.relpath(source, task_dir)
    if config.method in SOURCE_METHODS:
        return {config.method.replace("-", "_"): {"source": where, **method_record}}
    start: dict[str, Any] = {"from": config.start_from, "source": where}
    if config.start_from == "mask-search":
        start["mask"] = start_mask_outcome(json.loads((task_dir / START_MASK_FILE).read_text()), model)
    return {"start": start}


def _epoch_metrics(log_history: list[dict]) -> list[dict[str, Any]]:
    return [{k.removeprefix("eval_"): v for k, v in entry.items() if k.startswith("eval_") or k in ("epoch", "step")}
            for entry in log_history if any(k.startswith("eval_") for k in entry)]


def _saved_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file())


def _training_arguments(config: FinetuneConfig, hp: dict[str, Any], task_dir: Path, metric: str) -> Any:
    """The Trainer's arguments for one run: the resolved hyperparameters, one evaluation per epoch,
    checkpoints under ``checkpoints/`` (every ``save_steps`` or every epoch) and a seeded data order."""
    from transformers import TrainingArguments

    return TrainingArguments(
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
        report_to=list(config.report_to) or "none",
        dataloader_num_workers=0,
        # use_cpu on the CPU: torchrun on CPU processes is then data-parallel (gloo); bf16 on a GPU by default
        **trainer_arguments(config.device, config.precision),
        # the removal schedule freezes the gates mid-run: DDP must accept parameters without gradients
        ddp_find_unused_parameters=config.method != "full" or None,
        disable_tqdm=False,
    )


def _resume_point(task_dir: Path, state: str) -> tuple[str | None, int]:
    """(the newest checkpoint, its step) of an unfinished run being resumed; (None, 0) otherwise."""
    if state != "resume":
        return None, 0
    from transformers.trainer_utils import get_last_checkpoint

    checkpoints = task_dir / CHECKPOINTS
    last = get_last_checkpoint(str(checkpoints)) if checkpoints.is_dir() else None
    if last is None:
        logging.getLogger("glue_sparse").info(f"{task_dir}: stopped before its first checkpoint; starting it again")
        return None, 0
    return last, int(Path(last).name.split("-")[-1])


def _final_metrics(trainer: Any, epochs: list[dict[str, Any]], config: FinetuneConfig) -> dict[str, Any]:
    """The final model's validation metrics: the last epoch's evaluation when it scored this very model,
    else a fresh evaluation (``model_selection="best"`` reloads an earlier checkpoint)."""
    last_eval = epochs[-1] if epochs else {}
    if config.model_selection == "last" and last_eval.get("step") == trainer.state.global_step:
        return {k: v for k, v in last_eval.items() if k != "step"}
    return {k.removeprefix("eval_"): v for k, v in trainer.evaluate().items() if k.startswith("eval_")}


def _save_models(model: Any, config: FinetuneConfig, task_dir: Path, tokenizer: Any) -> dict[str, Any]:
    """Write the trained model (gates+full, magnitude, mask-search: a plain HF folder with the masks folded in,
    an adapter as itself; full fine-tuning is saved by the Trainer) and, with ``prune``, the pruned model in
    ``pruned/``; run.json's record of the latter. Main process only."""
    whole = saves_whole_model(config)
    pruned = copy.deepcopy(model).merge_and_unload() if whole and config.prune else None
    if whole:
        model.merge_and_unload(prune=False).save_pretrained(str(task_dir))  # masks folded: a plain HF model
        tokenizer.save_pretrained(str(task_dir))
    elif config.method != "full":
        model.save_pretrained(str(task_dir))
        tokenizer.save_pretrained(str(task_dir))
    if config.prune and not whole:
        pruned = model.merge_and_unload()
    if pruned is None:
        return {}
    pruned.save_pretrained(str(task_dir / PRUNED_SUBDIR))
    tokenizer.save_pretrained(str(task_dir / PRUNED_SUBDIR))
    return {"pruned": {"path": PRUNED_SUBDIR, "saved_bytes": _saved_bytes(task_dir / PRUNED_SUBDIR),
                       "accounting": parameter_accounting(pruned).to_dict()}}


def _run_record(config: FinetuneConfig, hp: dict[str, Any], ident: dict[str, Any], trainer: Any,
                splits: tuple[Any, Any],
                accounting: Any, task_dir: Path, measured: dict[str, Any], epochs: list[dict[str, Any]],
                final: dict[str, Any], gate_prints: list[str] | None) -> dict[str, Any]:
    """What run.json says of a finished run: settings, data provenance, environment, accounting, timing
    and memory (``measured``), every epoch's evaluation and the final metrics."""
    import torch

    return {
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
        "primary_metric": primary_metric(config.task),
        "data": {"train": provenance(splits[0]).to_dict(), "validation": provenance(splits[1]).to_dict()},
        "versions": package_versions(),
        "git": git_state(),
        "device": str(trainer.args.device),
        "threads": torch.get_num_threads(),
        "accounting": accounting.to_dict(),
        "saved_bytes": _saved_bytes(task_dir),
        "train_steps": trainer.state.global_step,
        **measured,
        "epochs": epochs,
        "final_metrics": final,
        "final_score": final.get(primary_metric(config.task)),
        "gate_learning_rate": trainer.gate_learning_rate,
        "world_size": trainer.args.world_size,
        "effective_batch_size": hp["batch_size"] * config.gradient_accumulation_steps * trainer.args.world_size,
        "gate_fingerprint_by_rank": gate_prints,
        "command": invoking_command(),
    }


def _train_and_measure(trainer: Any, last: str | None, start_step: int) -> dict[str, Any]:
    """Train (an unfinished run from its newest checkpoint ``last``, at ``start_step``) and return run.json's
    time and memory fields: training wall time over every process that trained the run (None if a resumed
    checkpoint did not record its share) and this process's, with and without its evaluations, steps, peak
    and starting RSS, and the peak GPU memory allocated on a GPU."""
    clock = ElapsedOnSave(seconds_before(last))
    trainer.add_callback(clock)
    with measured_stage(trainer.args.device) as measured:
        output = trainer.train(resume_from_checkpoint=last)
    trainer.remove_callback(clock)
    steps_here = trainer.state.global_step - start_step
    evaluations = _epoch_metrics(trainer.state.log_history)
    eval_seconds = sum(e.get("runtime", 0.0) for e in evaluations if e.get("step", 0) > start_step)
    step_seconds = max(measured["train_seconds"] - eval_seconds, 0.0)
    here = measured["train_seconds"]
    return {**measured, "train_seconds": None if clock.before is None else clock.before + here,
            "train_seconds_this_process": here, "train_runtime_reported": output.metrics.get("train_runtime"),
            "steps_this_process": steps_here, "eval_seconds_during_training": eval_seconds,
            "seconds_per_step": step_seconds / steps_here if steps_here else None,
            "resumed_from_step": start_step or None}


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
    from accelerate.utils import gather_object

    hp = config.resolved()
    task_dir = Path(output_dir) / config.task
    ident = identity(config)
    if output_dir_state(task_dir, ident, overwrite, resume) == "done":
        return json.loads((task_dir / RUN_FILE).read_text())
    # data first: a missing or malformed split fails here, before any folder is made
    train = load_glue_split(config.task, "train", data_dir, limit=hp["train_limit"], use_hub=use_hub)
    validation = load_glue_split(config.task, evaluation_split(config.task), data_dir, use_hub=use_hub)
    config, source = _sources(config, Path(output_dir), data_dir, use_hub)
    metric = primary_metric(config.task)
    args = _training_arguments(config, hp, task_dir, metric)  # first: it says which process this is
    processes = args.distributed_state  # under torchrun / accelerate launch: this rank; else one process
    state = output_dir_state(task_dir, ident, overwrite, resume)  # every rank reads the folder first
    processes.wait_for_everyone()
    if processes.is_main_process:  # only the main process prepares and writes the run folder
        prepare_output_dir(task_dir, ident, overwrite, resume)
    processes.wait_for_everyone()

    trainer, tokenizer = build_trainer(config, hp, args, source, callbacks, train, validation)
    # a run stopped before its first checkpoint (even inside its start's mask search) starts again from the top
    last, start_step = _resume_point(task_dir, state)
    one_shot = searched = None
    if config.method == "magnitude" and last is None:
        one_shot = {k.removeprefix("eval_"): v for k, v in trainer.evaluate().items() if k.startswith("eval_")}
    if config.start_from == "mask-search" and last is None:  # a resumed run's gates come from its checkpoint
        write_json_atomic(task_dir / START_MASK_FILE, start_closed(trainer, config, hp))

    if config.method == "mask-search":  # no training: the search and mask tuning are the run
        measured, searched = search_and_measure(trainer, config, hp)
    else:
        measured = _train_and_measure(trainer, last, start_step)
    if trainer.state.global_step < trainer.state.max_steps:
        return {"status": "interrupted", "task": config.task, "global_step": trainer.state.global_step,
                "max_steps": trainer.state.max_steps}

    epochs = _epoch_metrics(trainer.state.log_history)
    final = _final_metrics(trainer, epochs, config)
    model = trainer.model.eval()
    # gates+full and magnitude train every weight (magnitude under fixed masks), mask-search none: count what
    # trained; an adapter method counts its adapter, also where it is saved whole (a start from another run)
    every_weight = saves_whole_model(config) and config.method not in ADAPTER_METHODS
    trained = 0 if searched else sum(p.numel() for p in model.parameters() if p.requires_grad) if every_weight else None
    accounting = parameter_accounting(model, trainable_parameters=trained)
    gate_prints = gather_object([gate_fingerprint(model)]) if config.method != "full" else None
    if config.method == "full":
        trainer.save_model(str(task_dir))  # the Trainer saves on the main process only
    if not processes.is_main_process:
        processes.wait_for_everyone()  # the main process writes the run folder; wait for it
        return json.loads((task_dir / RUN_FILE).read_text())
    built_on = _built_on(config, source, task_dir, model, searched or {
        "one_shot_metrics": one_shot, "refinetune_steps": trainer.state.global_step})  # before saving folds gates
    saved = _save_models(model, config, task_dir, tokenizer)
    record = {**_run_record(config, hp, ident, trainer, (train, validation), accounting, task_dir, measured, epochs,
                            final, gate_prints), **built_on, **saved}
    if not keep_checkpoints:
        shutil.rmtree(task_dir / CHECKPOINTS, ignore_errors=True)
    write_json_atomic(task_dir / RUN_FILE, record)
    write_run_cards(task_dir, record, record["final_metrics"], TRAINER_SOURCE, base_folder=resolve_base_model(
        config.base_model))
    processes.wait_for_everyone()
    return record


def main(argv: Sequence[str] | None = None) -> int:
    """Worker entry point: ``python -m glue_sparse.finetune.run CONFIG_JSON OUTPUT [options]``.

    Used by ``glue-sparse bench`` to give every run its own process (and so its own peak RSS).
    """
    import argparse

    parser = argparse.ArgumentParser(prog="python -m glue_sparse.finetune.run")
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
