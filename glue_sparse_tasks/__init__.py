"""Layer 1, GLUE evaluation: task facts, the offline-first GLUE data layer, corpora, scoring (the one
source of every GLUE number), the lm-eval task YAMLs and the start-up hook that registers them. It
never imports the method (``sparse_models``) or anything above it.

This module stays import-light: a start-up hook imports it in every Python process, so heavy
names (``datasets``, scoring) load lazily on first use (``_LAZY``; the one deferred import of our
own modules in this layer, for start-up cost).
"""

from __future__ import annotations

import os

_HERE = os.path.dirname(os.path.abspath(__file__))  # os.path, not pathlib: keeps start-up cheap

TASKS_DIR: str = os.path.join(_HERE, "tasks")
"""Folder of the lm-eval task YAMLs (what ``--include_path`` would take)."""


def _metric_dir() -> str:
    packaged = os.path.join(_HERE, "_metrics", "glue_average")  # inside an installed wheel
    checkout = os.path.join(os.path.dirname(_HERE), "metrics", "glue_average")  # a checkout
    return packaged if os.path.isdir(packaged) else checkout


GLUE_AVERAGE_METRIC: str = _metric_dir()
"""Path for ``evaluate.load(GLUE_AVERAGE_METRIC)``: the ``glue_average`` metric, offline."""

_LAZY = {
    "load_glue_split": "glue_sparse_tasks.data",
    "load_glue_rows": "glue_sparse_tasks.data",
    "provenance": "glue_sparse_tasks.data",
    "LIMITED_TRAIN_ROWS": "glue_sparse_tasks.data",
    "GlueDataError": "glue_sparse_tasks.local_formats",
    "GLUE_TASKS": "glue_sparse_tasks.glue_tasks",
    "glue_average": "glue_sparse_tasks.scoring",
    "flat_metrics": "glue_sparse_tasks.scoring",
    "task_metrics": "glue_sparse_tasks.scoring",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    if name == "__version__":  # the version is written once, in pyproject.toml, and read here alone
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("glue-sparse")
        except PackageNotFoundError:  # a checkout that was never installed
            return "0+unknown"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["TASKS_DIR", "GLUE_AVERAGE_METRIC", *_LAZY]
