"""Predictions per submission file from lm-eval samples (``--log_samples`` files or ``simple_evaluate``'s
``samples``): each doc's prediction is ``glue_sparse_tasks.tasks.utils.prediction`` of its choices'
log-likelihoods, the rule lm-eval's own metrics use, so a file scores exactly as lm-eval scored it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from glue_sparse.predict.options import PredictInputError
from glue_sparse_tasks.data import fingerprint
from glue_sparse_tasks.glue_tasks import MNLI_SOURCE_COLUMN, get_task
from glue_sparse_tasks.local_formats import iter_jsonl_objects
from glue_sparse_tasks.submission import BY_GLUE_TASK
from glue_sparse_tasks.tasks.utils import prediction

#: lm-eval's sample file name: samples_<task>_<date id>.jsonl
SAMPLE_FILE = re.compile(r"^samples_(glue_sparse_[a-z0-9_]+?)_(\d{4}-\d{2}-\d{2}T[\d.\-]+)\.jsonl$")


@dataclass
class FilePredictions:
    """One submission file's rows, in the test file's order."""

    glue_task: str
    indices: list[int] = field(default_factory=list)
    predictions: list[int | float] = field(default_factory=list)
    references: list[int | float] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)

    def data_sha256(self) -> str:
        """The rows' fingerprint, as the data layer computes it (``glue-sparse data`` shows the same)."""
        return fingerprint(self.rows)


def split_of(task_name: str) -> str:
    """The split an lm-eval task of ours predicts: the ``_test`` variants the test split."""
    return "test" if task_name.endswith("_test") else "validation"


def file_key(doc: dict[str, Any]) -> str:
    """The submission file a doc belongs to (pooled MNLI docs by their source: matched or mismatched)."""
    glue_task = doc["glue_task"]
    return f"mnli_{doc[MNLI_SOURCE_COLUMN]}" if glue_task == "mnli" else glue_task


def predictions_from_samples(task_name: str, samples: Iterable[dict[str, Any]], where: str,
                             split: str) -> dict[str, FilePredictions]:
    """Each file's predictions from one lm-eval task's samples; a test doc with a label is refused."""
    if split_of(task_name) != split:
        if task_name == "glue_sparse_ax_test":
            raise PredictInputError(f"{where}: AX (the diagnostic set) has a test split only; --split test")
        other = task_name.removesuffix("_test") if split == "validation" else f"{task_name}_test"
        raise PredictInputError(f"{where}: {task_name} predicts the {split_of(task_name)} split, not --split "
                                f"{split}; run {other} (or pass --split {split_of(task_name)})")
    out: dict[str, FilePredictions] = {}
    for sample in sorted(samples, key=lambda s: int(s["doc_id"])):
        doc = sample["doc"]
        key = file_key(doc)
        if key not in BY_GLUE_TASK:
            raise PredictInputError(f"{where}: doc {sample['doc_id']} has glue_task {doc['glue_task']!r}, which no "
                                    "GLUE submission file holds")
        label = doc["label"]
        if split == "test" and label != -1:
            raise PredictInputError(f"{where}: test doc idx {doc['idx']} of {task_name} has label {label!r}; a test "
                                    "split has no labels (-1, as in nyu-mll/glue): is it a validation file? "
                                    "(--split validation scores labelled data)")
        logliks = [float(r[0]) for r in sample["filtered_resps"]]
        spec = get_task(BY_GLUE_TASK[key].data_task)
        entry = out.setdefault(key, FilePredictions(key))
        entry.indices.append(int(doc["idx"]))
        entry.predictions.append(prediction(doc["glue_task"], logliks))
        entry.references.append(label)
        entry.rows.append({c: doc[c] for c in spec.columns})
    return out


def sample_files(path: str | Path) -> dict[str, Path]:
    """lm-eval task name -> its samples file, under an ``--output_path`` folder (or one file)."""
    root = Path(path)
    if not root.exists():
        raise PredictInputError(f"--samples {path}: no such file or folder")
    files = [root] if root.is_file() else sorted(root.rglob("samples_glue_sparse_*.jsonl"))
    found: dict[str, Path] = {}
    for file in files:
        match = SAMPLE_FILE.match(file.name)
        if not match:
            raise PredictInputError(f"--samples {file}: not an lm-eval samples file of a glue_sparse task "
                                    "(samples_glue_sparse_<task>_<date>.jsonl)")
        task = match.group(1)
        if task in found:
            raise PredictInputError(f"--samples {path}: two sample files for {task} ({found[task].name}, {file.name}); "
                                    "pass one lm-eval run's folder")
        found[task] = file
    if not found:
        raise PredictInputError(f"--samples {path}: no samples_glue_sparse_*.jsonl files; run lm_eval on glue_sparse "
                                "tasks with --log_samples (or --predict_only) and --output_path")
    return found


def read_samples(file: Path) -> list[dict[str, Any]]:
    """The samples of one file; a line that is no sample is named by file and line."""
    samples = []
    for number, sample in iter_jsonl_objects(file):
        if not {"doc_id", "doc", "filtered_resps"} <= set(sample):
            raise PredictInputError(f"{file}:{number}: an lm-eval sample needs doc_id, doc and filtered_resps")
        samples.append(sample)
    return samples
