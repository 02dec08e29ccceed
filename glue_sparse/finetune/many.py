"""Several fine-tunes from one set of options (tasks x seeds): every configuration and output folder is
checked before anything trains, then the runs go one after another (``glue-sparse finetune``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from accelerate import PartialState

from glue_sparse.finetune.options import FinetuneConfig, FinetuneConfigError, TrainingOptions
from glue_sparse.finetune.run import run_finetune
from glue_sparse.finetune.run_dir import identity, output_dir_state
from glue_sparse_tasks.atomic import check_writable
from glue_sparse_tasks.data import load_glue_rows
from glue_sparse_tasks.glue_tasks import GLUE8, GLUE_TASKS
from glue_sparse_tasks.local_formats import GlueDataError


def available_tasks(names: list[str], data_dir: str | None, use_hub: bool) -> tuple[list[str], dict[str, str]]:
    """(tasks with training data, {task: why not} for the others)."""
    found, skipped = [], {}
    for task in names:
        try:
            load_glue_rows(task, "train", data_dir, limit=1, use_hub=use_hub)
            found.append(task)
        except GlueDataError as exc:
            skipped[task] = str(exc).splitlines()[0]
    return found, skipped


def plan_finetunes(tasks: str, seeds: str, options: TrainingOptions, output: str, base_model: str | None = None,
                   data_dir: str | None = None, use_hub: bool = True, overwrite: bool = False,
                   resume: bool = False) -> list[tuple[FinetuneConfig, Path]]:
    """Every (config, output folder) to train, all checked first (tasks, data, options, folders); a
    problem is a ``FinetuneConfigError`` naming it, before any folder is made or model loaded."""
    log = logging.getLogger("glue_sparse").info
    try:
        seed_list = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        raise FinetuneConfigError(f"--seeds takes comma-separated integers, got {seeds!r}") from None
    if tasks == "all":
        names, skipped = available_tasks(list(GLUE8), data_dir, use_hub)
        for task, why in skipped.items():
            log(f"skipping {task}: no training data ({why})")
    else:
        names = [t.strip() for t in tasks.split(",") if t.strip()]
        unknown = [t for t in names if t not in GLUE_TASKS]
        if unknown:
            raise FinetuneConfigError(f"unknown task(s) {unknown}; valid tasks are: {', '.join(GLUE_TASKS)}")
        _, no_train = available_tasks(names, data_dir, use_hub)
        if no_train:
            raise FinetuneConfigError("; ".join(f"{task} has no usable training data: {why}"
                                                for task, why in no_train.items()))
    check_writable(output, "--output")
    fields: dict[str, Any] = {name: getattr(options, name) for name in options.__dataclass_fields__}
    plan = []
    for seed in seed_list:
        for task in names:
            config = FinetuneConfig(task=task, seed=seed, base_model=base_model, **fields)
            out = Path(output) / f"seed-{seed}" if len(seed_list) > 1 else Path(output)
            output_dir_state(out / task, identity(config), overwrite, resume)
            plan.append((config, out))
    if not plan:
        raise FinetuneConfigError("no task to train")
    return plan


def run_finetunes(plan: list[tuple[FinetuneConfig, Path]], data_dir: str | None = None, use_hub: bool = True,
                  overwrite: bool = False, resume: bool = False, keep_checkpoints: bool = False) -> list[dict]:
    """Train every planned run (one after another); return their run records."""
    # under torchrun: every rank has checked before any folder is made (cpu=True: gloo without CUDA,
    # as the Trainer's own TrainingArguments(use_cpu=...) will set it up)
    PartialState(cpu=not torch.cuda.is_available()).wait_for_everyone()
    records = []
    for config, out in plan:
        logging.getLogger("glue_sparse").info(
            f"== {config.task} · {config.method} · {config.regime} · seed {config.seed} -> {out / config.task}")
        records.append(run_finetune(config, out, data_dir=data_dir, overwrite=overwrite, resume=resume,
                                    keep_checkpoints=keep_checkpoints, use_hub=use_hub))
    return records


def _seconds(value: float | None) -> str:
    """Wall seconds, or '-' where a resumed run's earlier processes did not record theirs."""
    return f"{'-':>8}" if value is None else f"{value:>8.0f}"


def summary_table(records: list[dict]) -> str:
    """One line per run: score, trainable parameters, removal, speed, wall time (a mask search's: the
    search), memory."""
    lines = [f"{'task':<6} {'seed':>4} {'metric':<9} {'score':>7} {'trainable':>10} {'removed':>8} "
             f"{'s/step':>7} {'train s':>8} {'peak MB':>8}"]
    for r in records:
        accounting = r["accounting"]
        per_step = f"{r['seconds_per_step']:>7.3f}" if r["seconds_per_step"] else f"{'-':>7}"
        lines.append(f"{r['task']:<6} {r['seed']:>4} {r['primary_metric']:<9} {r['final_score']:>7.4f} "
                     f"{accounting['trainable_parameters']:>10,} {accounting['removed_share_of_gated']:>8.1%} "
                     f"{per_step} {_seconds(r['train_seconds'])} {r['peak_rss_bytes'] / 2**20:>8.0f}")
    if any(r["selection_is_optimistic"] for r in records):
        lines.append("note: --select best reports the best validation epoch: an optimistic estimate")
    return "\n".join(lines)
