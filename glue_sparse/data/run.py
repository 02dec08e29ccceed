"""Which GLUE splits are where, with rows, labels, fingerprint and source (``glue-sparse data``)."""

from __future__ import annotations

import json
import os
from collections import Counter

from glue_sparse.data.options import DataOptions
from glue_sparse_tasks.data import DATA_DIR_ENV, data_dirs, load_glue_rows
from glue_sparse_tasks.errors import UserInputError
from glue_sparse_tasks.glue_tasks import GLUE_TASKS, POOLED_SPLIT
from glue_sparse_tasks.local_formats import GlueDataError, GlueSplitNotFound

SUMMARY_SPLITS = ("train", "validation", "validation_matched", "validation_mismatched", POOLED_SPLIT)


def _splits_to_show(task: str) -> list[str]:
    return [s for s in GLUE_TASKS[task].splits if s in SUMMARY_SPLITS]


def _label_counts(rows: list[dict], is_regression: bool) -> str:
    labels = [r["label"] for r in rows]
    if is_regression:
        return f"mean {sum(labels) / len(labels):.3f} in [{min(labels):g}, {max(labels):g}]"
    counts = Counter(labels)
    return " ".join(f"{k}:{counts[k]}" for k in sorted(counts))


def show_splits(options: DataOptions) -> int:
    """Print rows, label counts, source and fingerprint of every split; mark what is missing."""

    if options.data_dir and not os.path.isdir(options.data_dir):
        raise UserInputError(f"--data-dir {options.data_dir}: not a directory; give the folder that holds the "
                             "GLUE task folders (or its parent holding glue/)")
    tasks = list(GLUE_TASKS) if options.tasks == "all" else options.tasks.split(",")
    unknown = [t for t in tasks if t not in GLUE_TASKS]
    if unknown:
        raise UserInputError(f"unknown GLUE task(s) {unknown}; valid tasks are: {', '.join(GLUE_TASKS)}")
    records = []
    missing = broken = 0
    for task in tasks:
        spec = GLUE_TASKS[task]
        for split in _splits_to_show(task):
            try:
                rows, prov = load_glue_rows(task, split, options.data_dir, use_hub=options.hub)
            except GlueSplitNotFound as exc:
                missing += 1
                records.append({"task": task, "split": split, "missing": True,
                                "why": str(exc).splitlines()[0]})
                continue
            except GlueDataError as exc:  # present but unreadable: show the error, not "missing"
                broken += 1
                records.append({"task": task, "split": split, "missing": False, "error": str(exc)})
                continue
            records.append({**prov.to_dict(), "missing": False,
                            "labels": _label_counts(rows, spec.is_regression)})
    if options.json:
        print(json.dumps(records, indent=2))
        return 2 if broken else 0
    print(f"{'task':<6} {'split':<22} {'rows':>7}  {'labels':<34} {'sha256':<12}  source")
    for r in records:
        if r["missing"]:
            print(f"{r['task']:<6} {r['split']:<22} {'MISSING':>7}  (not found locally"
                  f"{' or on the Hub' if options.hub else ''})")
        elif "error" in r:
            print(f"{r['task']:<6} {r['split']:<22} {'ERROR':>7}  {r['error']}")
        else:
            print(f"{r['task']:<6} {r['split']:<22} {r['rows']:>7}  {r['labels']:<34} "
                  f"{r['sha256'][:12]}  {r['source']}")
    print(f"\n{len(records) - missing - broken} splits found, {missing} missing, {broken} unreadable.")
    if missing and not data_dirs(options.data_dir):
        print(f"No local folder was given: pass --data-dir or set ${DATA_DIR_ENV} to the folder holding "
              "the task folders.")
    return 2 if broken else 0
