"""``glue-sparse export``: each asked task of a run as one Hub-ready folder: ``config.json`` and
``model.safetensors`` (a gates or LoRA adapter merged into a plain model; the pruned variant with its code and
``auto_map``, so it loads without glue-sparse), the tokenizer, and a model card with the run's own scores
and measured speed-up. ``--format onnx`` writes ``model.onnx`` for ONNX Runtime instead (fp32 or int8; see
``sparse_models.deploy``), with the original architecture's ``config.json``. Everything asked is checked before
anything is written, and each folder appears whole (written aside, then renamed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from glue_sparse.common.latency import checkpoint_latency
from glue_sparse.common.model_card import LATENCY_FILE, run_scores, write_model_card
from glue_sparse.common.packaged import minilm_path
from glue_sparse.export.options import FORMATS, VARIANTS, ExportOptions
from glue_sparse_tasks.atomic import check_writable
from glue_sparse_tasks.errors import UserInputError
from glue_sparse_tasks.glue_tasks import GLUE_TASKS
from glue_sparse_tasks.precisions import INT8_SCALES, QUANTIZE_CHOICES
from sparse_models.deploy.onnx_export import export_onnx, require_onnx
from sparse_models.checkpoints import PRUNED_SUBDIR, RUN_FILE, describe_checkpoint, load_classifier
from sparse_models.trainer import sparse_gates_tuner


def run_tasks(options: ExportOptions) -> dict[str, Path]:
    """{task: its run folder} for every task asked, each holding the asked variant; one line naming what is
    missing otherwise (before anything is written)."""
    root = Path(options.run)
    if not root.is_dir():
        raise UserInputError(f"--run {root}: no such folder")
    if (root / RUN_FILE).is_file():
        found = {json.loads((root / RUN_FILE).read_text())["task"]: root}
    else:
        found = {p.name: p for p in sorted(root.iterdir()) if (p / RUN_FILE).is_file()}
    if not found:
        raise UserInputError(f"--run {root}: holds no finished run (no {RUN_FILE} in it or in a <task>/ folder)")
    asked = [t for t in (options.task or "").split(",") if t] or list(found)
    missing = [t for t in asked if t not in found]
    if missing:
        raise UserInputError(f"--run {root} has no finished run for task(s) {', '.join(missing)}; it holds "
                             f"{', '.join(found)}")
    for flag, value, choices in (("--variant", options.variant, VARIANTS), ("--format", options.format, FORMATS),
                                 ("--quantize", options.quantize, QUANTIZE_CHOICES),
                                 ("--int8-scales", options.int8_scales, INT8_SCALES)):
        if value not in choices:
            raise UserInputError(f"{flag} {value!r}: expected one of {', '.join(choices)}")
    if options.quantize != "none" and options.format != "onnx":
        raise UserInputError(f"--quantize {options.quantize} quantises an ONNX graph: add --format onnx")
    if options.format == "onnx":
        require_onnx("--format onnx")
    if options.variant == "pruned":
        unpruned = [t for t in asked if not (found[t] / PRUNED_SUBDIR).is_dir()]
        if unpruned:
            raise UserInputError(f"--variant pruned: the run kept no pruned model for {', '.join(unpruned)} (no "
                                 f"{PRUNED_SUBDIR}/ folder; fine-tune with --prune, or export --variant checkpoint)")
    return {t: found[t] for t in asked}


def _model_and_tokenizer(task_dir: Path, variant: str) -> tuple[Any, Any]:
    """The model to export, in fp32 on the CPU: the pruned one, or the kept checkpoint (an adapter merged:
    sparse gates with their closed rows and columns folded in as zeros, LoRA into its weights)."""
    import torch

    model, tokenizer = load_classifier(describe_checkpoint(task_dir / PRUNED_SUBDIR if variant == "pruned"
                                                           else task_dir), torch.float32, "cpu")
    if variant == "checkpoint" and hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload(prune=False) if sparse_gates_tuner(model) else model.merge_and_unload()
    return model.eval(), tokenizer


def _base_folder(identity: str) -> str | None:
    """The base model's folder where it is a packaged default (for the license its card names)."""
    return minilm_path() if identity.startswith("all-MiniLM-L6-v2") else None


def _latency(task_dir: Path, task: str, record: dict[str, Any], options: ExportOptions) -> dict[str, Any] | None:
    """The run's recorded latency (a bench cell's), else timed here; None where nothing was removed."""
    if (task_dir / LATENCY_FILE).is_file():
        return json.loads((task_dir / LATENCY_FILE).read_text())
    removable = record["accounting"].get("removed_gated_weights") or record["accounting"].get("closed_gated_weights")
    if not options.latency_docs or not removable or removable < 0:
        return None
    return checkpoint_latency(task_dir, task, options.data_dir, docs=options.latency_docs,
                              max_length=record["hyperparameters"].get("max_length", 128))


def _sample(tokenizer: Any, task: str) -> dict[str, Any]:
    """Two examples of unequal length (padding and its mask exercised) in the task's input shape, to trace the
    graph and check its logits against torch's."""
    first = ["a short example", "a somewhat longer example sentence, with more words in it than the first"]
    second = ["and its pair", "the second text of a pair"] if len(GLUE_TASKS[task].text_fields) == 2 else None
    return dict(tokenizer(first, second, padding=True, return_tensors="pt"))


def _write_onnx(staging: Path, task: str, model: Any, tokenizer: Any, record: dict[str, Any],
                options: ExportOptions) -> dict[str, Any]:
    """``model.onnx``, its record and the original architecture's ``config.json`` naming the task; the record."""
    staging.mkdir(parents=True)
    pruned = options.variant == "pruned"
    accounting = (record.get("pruned") or {}).get("accounting") if pruned else None
    onnx_record = export_onnx(model, _sample(tokenizer, task), staging, options.quantize,
                              options.int8_scales == "per-channel",
                              source=f"{record.get('base_model', '?')}, {record['method']} on {task}"
                                     + (", pruned" if pruned else ""),
                              accounting=accounting or record["accounting"], task=task)
    return vars(onnx_record)


def export_task(task: str, task_dir: Path, options: ExportOptions) -> Path:
    """One task's Hub-ready (or ONNX) folder, ``<output>/<task>/``, replaced whole."""
    record = json.loads((task_dir / RUN_FILE).read_text())
    model, tokenizer = _model_and_tokenizer(task_dir, options.variant)
    target = Path(options.output) / task
    staging = target.with_name(f".{task}.exporting")
    shutil.rmtree(staging, ignore_errors=True)
    onnx = _write_onnx(staging, task, model, tokenizer, record, options) if options.format == "onnx" else None
    if onnx is None:
        model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    metrics, source = run_scores(task_dir, record)
    write_model_card(staging, record, metrics, source, _latency(task_dir, task, record, options),
                     pruned=options.variant == "pruned", base_folder=_base_folder(record.get("base_model", "")),
                     onnx=onnx)
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
    return target


def export_run(options: ExportOptions) -> list[Path]:
    """Every asked task of the run exported; the folders written."""
    tasks = run_tasks(options)
    Path(options.output).mkdir(parents=True, exist_ok=True)
    check_writable(Path(options.output), "--output")
    return [export_task(task, task_dir, options) for task, task_dir in tasks.items()]
