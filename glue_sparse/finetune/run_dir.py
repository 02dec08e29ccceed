"""A fine-tuning run's folder: the identity that keys it, whether it is fresh, finished or resumable,
and refusing a folder that holds another run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from glue_sparse.common.packaged import model_identity
from glue_sparse.finetune.models import resolve_base_model
from glue_sparse.finetune.options import FinetuneConfig, FinetuneConfigError
from glue_sparse_tasks.atomic import write_json_atomic
from sparse_models.checkpoints import RUN_FILE
from sparse_models.runtime.devices import resolve_device, resolve_precision

IDENTITY_FILE = "run_config.json"
CHECKPOINTS = "checkpoints"
#: where a run that builds on a full fine-tune (magnitude, mask-search, a gate method's --start-from) without
#: --from, or a distilled one without --teacher, trains (or finds) that fine-tune, under its output folder
MAGNITUDE_SOURCE = "magnitude-source"


class OutputDirError(FinetuneConfigError):
    """The output folder holds another run (or something else) and ``overwrite`` was not given."""


#: how a run names the teacher it trains itself (``full_source_config``): its identity follows from the rest
FULL_SOURCE_TEACHER = "the full fine-tune of this task with this run's data, budget and seed"


def identity(config: FinetuneConfig) -> dict[str, Any]:
    """What makes two runs the same run: every resolved hyperparameter and the actual base model, named
    by name and weights sha256 (``model_identity``), never by the path it was loaded from."""

    out = config.resolved()
    out["base_model"] = model_identity(resolve_base_model(config.base_model))
    if out.get("distill"):  # a teacher by its weights, or the full fine-tune this run trains first
        out["teacher"] = model_identity(out["teacher"]) if out["teacher"] else FULL_SOURCE_TEACHER
    out.pop("report_to", None)  # where logs go does not change the run
    out.pop("device", None)  # nor where it runs: a run started on one device may resume on another
    out["precision"] = resolve_precision(config.precision, resolve_device(config.device))  # 'auto': what it is here
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
