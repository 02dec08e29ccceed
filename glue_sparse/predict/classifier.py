"""A fine-tuning run's predictions: its checkpoints answer the ``glue_sparse_*`` tasks (validation) or their
``_test`` variants through lm-eval with ``hf-classifier``, exactly as ``lm_eval --model hf-classifier``
would, and the samples become files (``samples.py``). Everything that can be refused is checked first:
the tasks, each checkpoint's label count and each split's data."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from glue_sparse.common.packaged import model_identity
from glue_sparse.lm_eval_model.classifier_lm import HFClassifierLM
from glue_sparse.predict.options import PredictInputError, PredictOptions
from glue_sparse.predict.samples import FilePredictions, predictions_from_samples
from glue_sparse_tasks import TASKS_DIR
from glue_sparse_tasks.data import load_glue_rows
from glue_sparse_tasks.submission import SUBMISSION_FILES
from glue_sparse_tasks.tasks.utils import answering_task, data_source


def _lm_eval_task(glue_task: str, split: str) -> str:
    return f"glue_sparse_{glue_task}_test" if split == "test" else f"glue_sparse_{glue_task}"


def planned_tasks(lm: HFClassifierLM, options: PredictOptions) -> list[str]:
    """The files' glue_tasks this run can answer (AX on the test split only), narrowed by ``--tasks``."""
    trained = {t for t in lm.checkpoints if t} or {None}
    wanted = None if options.tasks == "all" else {t.strip() for t in options.tasks.split(",") if t.strip()}
    if None in trained and wanted is None:
        raise PredictInputError(f"--run {options.run}: one checkpoint whose GLUE task is not recorded; name it with "
                                "--tasks TASK")
    names = [f.glue_task for f in SUBMISSION_FILES if options.split == "test" or f.glue_task != "ax"]
    if wanted is not None:
        known = {answering_task(g) for g in names}
        unknown = sorted(wanted - known)
        if unknown:
            raise PredictInputError(f"--tasks: unknown task(s) {unknown}; expected some of {', '.join(sorted(known))}")
    chosen = [g for g in names if (None in trained or answering_task(g) in trained)
              and (wanted is None or answering_task(g) in wanted)]
    if wanted is not None and (missing := sorted(wanted - {answering_task(g) for g in chosen})):
        raise PredictInputError(f"--run {options.run} has no checkpoint for {', '.join(missing)}; it has: "
                                f"{', '.join(sorted(t for t in lm.checkpoints if t)) or 'one checkpoint'}")
    return chosen


def check_data(glue_tasks: list[str], options: PredictOptions) -> dict[str, str]:
    """Each task's data is there and, on the test split, unlabelled; its source per glue_task."""
    sources = {}
    for glue_task in glue_tasks:
        task, split = data_source(glue_task, options.split)
        rows, prov = load_glue_rows(task, split, options.data_dir, use_hub=options.hub)
        labelled = next((r for r in rows if r["label"] != -1), None) if options.split == "test" else None
        if labelled is not None:
            raise PredictInputError(f"{prov.source.removeprefix('local:')} (GLUE {task}/{split}): row idx "
                                    f"{labelled['idx']} has label {labelled['label']!r}; a test split has no labels "
                                    "(-1, as in nyu-mll/glue): is it a validation file? (--split validation scores "
                                    "labelled data)")
        sources[glue_task] = prov.source
    return sources


def predict_run(options: PredictOptions) -> tuple[dict[str, FilePredictions], dict[str, Any]]:
    """Per file the run's predictions, and what made them (checkpoints by content hash, data sources)."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    with tempfile.TemporaryDirectory() as scratch:
        lm = HFClassifierLM(pretrained=options.run, batch_size=options.batch_size,
                            device=None if options.device == "auto" else options.device, dtype=options.precision,
                            base=options.base, variant=options.variant,
                            results_json=str(Path(scratch) / "hf_classifier.json"))
        glue_tasks = planned_tasks(lm, options)
        checkpoints = {}
        for glue_task in glue_tasks:
            ckpt = lm.checkpoint_for(glue_task)
            lm.check_labels(glue_task, ckpt)
            checkpoints[answering_task(glue_task)] = model_identity(ckpt.path)
        sources = check_data(glue_tasks, options)
        metadata = {"data_dir": options.data_dir} if options.data_dir else {}
        manager = TaskManager(include_path=TASKS_DIR, include_defaults=False, metadata=metadata)
        tasks = [_lm_eval_task(g, options.split) for g in glue_tasks]
        out = simple_evaluate(model=lm, tasks=tasks, task_manager=manager, log_samples=True,
                              predict_only=options.split == "test", bootstrap_iters=0)
    files: dict[str, FilePredictions] = {}
    for task in tasks:
        files.update(predictions_from_samples(task, out["samples"][task], task, options.split))
    provenance = {"run": {"checkpoints": checkpoints, "variant": options.variant or "as trained",
                          "hf_classifier": {task: {k: v for k, v in entry.items() if k != "checkpoint"}
                                            for task, entry in lm.report.items()}},  # named by hash, not path
                  "data_sources": sources}
    return files, provenance
