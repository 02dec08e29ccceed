"""The submission folder: one ``index<TAB>prediction`` file per task (``glue_sparse_tasks.submission``),
``submission.zip`` holding them flat, and ``predict.json``. It is built beside ``--output`` and renamed into
place, so a reader never sees half a submission, and an ``--overwrite`` keeps the old one until the new one
is complete."""

from __future__ import annotations

import csv
import io
import os
import shutil
import zipfile
from pathlib import Path
from typing import Any

from glue_sparse.predict.options import PredictInputError
from glue_sparse.predict.samples import FilePredictions
from glue_sparse_tasks.atomic import check_writable, write_json_atomic
from glue_sparse_tasks.submission import BY_GLUE_TASK, HEADER, SUBMISSION_FILES, ZIP_NAME

RECORD_FILE = "predict.json"


def check_output(output: Path, overwrite: bool) -> None:
    """Refuse, before any model loads, a folder that holds something unless ``--overwrite`` says replace it."""
    check_writable(output)
    if output.exists() and not output.is_dir():
        raise PredictInputError(f"--output {output}: a file, not a folder")
    if output.is_dir() and any(output.iterdir()) and not overwrite:
        what = "another submission" if (output / RECORD_FILE).exists() else "other files"
        raise PredictInputError(f"--output {output} holds {what}; pass --overwrite to replace it (atomically) or "
                                "choose an empty folder")


def file_text(predictions: FilePredictions) -> str:
    """One file's text: the header, then ``index<TAB>prediction`` per row in the test file's order."""
    spec = BY_GLUE_TASK[predictions.glue_task]
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter="\t", lineterminator="\n")
    writer.writerow(HEADER)
    writer.writerows((index, spec.text(value)) for index, value in zip(predictions.indices, predictions.predictions))
    return buffer.getvalue()


def write_submission(output: Path, files: dict[str, FilePredictions], record: dict[str, Any]) -> None:
    """Write the files present, their zip and ``record`` as ``predict.json``."""
    output = output.resolve()
    staging = output.parent / f".{output.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    with zipfile.ZipFile(staging / ZIP_NAME, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for spec in SUBMISSION_FILES:
            if spec.glue_task in files:
                text = file_text(files[spec.glue_task])
                (staging / spec.name).write_text(text, encoding="utf-8")
                archive.writestr(spec.name, text)
    write_json_atomic(staging / RECORD_FILE, record)
    old = output.parent / f".{output.name}.old-{os.getpid()}"
    if output.exists():
        output.rename(old)
    staging.rename(output)
    shutil.rmtree(old, ignore_errors=True)
