"""GLUE scoring: the one source of truth for per-task metrics and GLUE averages.

Used by the lm-eval aggregations, the ``glue_average`` evaluate metric, fine-tuning and reports.
Definitions follow GLUE's published protocol: CoLA is Matthews correlation, STS-B Pearson, the rest accuracy
(MRPC/QQP also F1), MNLI matched / mismatched / pooled. Metrics are on a [0, 1] scale.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from glue_sparse_tasks.errors import UserInputError
from glue_sparse_tasks.glue_tasks import GLUE_TASKS

MNLI_PARTS = ("mnli_matched", "mnli_mismatched")
"""Row-level task names for MNLI: the pooled ``mnli`` score is computed over both."""

SCORED_TASKS: tuple[str, ...] = (
    "cola", "sst2", "mrpc", "qqp", "stsb", *MNLI_PARTS, "qnli", "rte", "wnli",
)
"""Names a row may carry in the evaluate metric's ``tasks`` input."""


class ScoringInputError(UserInputError):
    """A prediction or reference the task cannot score; the message names task, row and value."""


def _checked_values(task: str, kind: str, values: Sequence, labels: int | None) -> list:
    """Every value as a finite number, and for classification an integer label in ``0..labels-1``.
    Checked here, in the scoring module, so lm-eval, the evaluate metric and reports all refuse the
    same inputs with the same message."""
    out = []
    for row, value in enumerate(values):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ScoringInputError(f"{task}: {kind} row {row} is {value!r} ({type(value).__name__}); "
                                    "expected a number")
        if not math.isfinite(float(value)):
            raise ScoringInputError(f"{task}: {kind} row {row} is {value!r}; expected a finite number")
        if labels is not None:
            if float(value) != int(value) or not 0 <= int(value) < labels:
                raise ScoringInputError(f"{task}: {kind} row {row} is {value!r}; expected a label id in "
                                        f"0..{labels - 1}")
            value = int(value)
        out.append(value)
    return out


class UndefinedCorrelationWarning(RuntimeWarning):
    """A correlation was asked of a constant vector; the result is NaN."""


def _check_lengths(predictions: Sequence, references: Sequence) -> None:
    if len(predictions) != len(references):
        raise ValueError(
            f"predictions and references differ in length: {len(predictions)} != {len(references)}"
        )
    if len(predictions) == 0:
        raise ValueError("cannot score an empty list of predictions")


def accuracy(predictions: Sequence[int], references: Sequence[int]) -> float:
    _check_lengths(predictions, references)
    return float(accuracy_score(references, predictions))


def binary_f1(predictions: Sequence[int], references: Sequence[int]) -> float:
    """F1 of the positive class (label 1), as GLUE reports for MRPC and QQP."""
    _check_lengths(predictions, references)
    return float(f1_score(references, predictions, pos_label=1, average="binary", zero_division=0.0))


def mcc(predictions: Sequence[int], references: Sequence[int]) -> float:
    """Matthews correlation; constant predictions give 0 (scikit-learn's defined value)."""
    _check_lengths(predictions, references)
    return float(matthews_corrcoef(references, predictions))


def _correlation(kind: str, predictions: Sequence[float], references: Sequence[float]) -> float:
    _check_lengths(predictions, references)
    x = np.asarray(predictions, dtype=np.float64)
    y = np.asarray(references, dtype=np.float64)
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        warnings.warn(
            f"{kind} correlation is undefined for constant input (or fewer than 2 rows); "
            "returning NaN",
            UndefinedCorrelationWarning,
            stacklevel=3,
        )
        return math.nan
    fn = stats.pearsonr if kind == "pearson" else stats.spearmanr
    return float(fn(x, y)[0])


def pearson(predictions: Sequence[float], references: Sequence[float]) -> float:
    return _correlation("pearson", predictions, references)


def spearman(predictions: Sequence[float], references: Sequence[float]) -> float:
    return _correlation("spearman", predictions, references)


def task_metrics(task: str, predictions: Sequence, references: Sequence) -> dict[str, float]:
    """Every raw metric of one task, keyed without the task prefix (``mcc``, ``accuracy``, ...).

    ``task`` is a GLUE task name, or ``mnli_matched`` / ``mnli_mismatched`` (scored as MNLI).
    """
    name = "mnli" if task in MNLI_PARTS else task
    if name not in GLUE_TASKS:
        raise ValueError(f"unknown GLUE task {task!r}; valid tasks are: {', '.join(SCORED_TASKS)}")
    labels = None if GLUE_TASKS[name].is_regression else GLUE_TASKS[name].num_labels
    predictions = _checked_values(task, "prediction", predictions, labels)
    references = _checked_values(task, "reference", references, labels)
    if name == "stsb":
        return {"pearson": pearson(predictions, references),
                "spearman": spearman(predictions, references)}
    preds, refs = predictions, references
    if name == "cola":
        return {"mcc": mcc(preds, refs), "accuracy": accuracy(preds, refs)}
    out = {"accuracy": accuracy(preds, refs)}
    if name in ("mrpc", "qqp"):
        out["f1"] = binary_f1(preds, refs)
    return out


def flat_metrics(
    predictions: Sequence, references: Sequence, tasks: Sequence[str]
) -> dict[str, float]:
    """Score rows of mixed tasks into one flat dict (``cola_mcc``, ``mnli_accuracy``, ...).

    Rows of ``mnli_matched`` and ``mnli_mismatched`` are scored separately and, when both are
    present, pooled into ``mnli_accuracy`` = (correct_m + correct_mm) / (n_m + n_mm).
    """
    _check_lengths(predictions, references)
    if len(tasks) != len(predictions):
        raise ValueError(
            f"tasks and predictions differ in length: {len(tasks)} != {len(predictions)}"
        )
    unknown = sorted(set(tasks) - set(SCORED_TASKS))
    if unknown:
        raise ValueError(
            f"unknown task name(s) {unknown}; each row's task must be one of: {', '.join(SCORED_TASKS)}"
        )
    rows: dict[str, tuple[list, list]] = {}
    for p, r, t in zip(predictions, references, tasks):
        bucket = rows.setdefault(t, ([], []))
        bucket[0].append(p)
        bucket[1].append(r)
    if all(part in rows for part in MNLI_PARTS):  # pooled only when both halves are there
        rows["mnli"] = tuple(sum((rows[part][i] for part in MNLI_PARTS), []) for i in (0, 1))
    out: dict[str, float] = {}
    for t in (*SCORED_TASKS, "mnli"):
        if t in rows:
            for metric, value in task_metrics(t, *rows[t]).items():
                out[f"{t}_{metric}"] = value
    return out


@dataclass(frozen=True)
class Convention:
    """One way of turning per-task metrics into a GLUE average.

    ``entries`` maps an entry name to the flat metric keys averaged into that entry; the GLUE
    average is the unweighted mean of the entries.
    """

    name: str
    description: str
    entries: Mapping[str, tuple[str, ...]]

    def required_tasks(self) -> list[str]:
        return sorted({key_task(k) for keys in self.entries.values() for k in keys})


def key_task(flat_key: str) -> str:
    """The GLUE task a flat metric key belongs to (``mnli_matched_accuracy`` -> ``mnli``)."""
    return flat_key.split("_", 1)[0]


CONVENTIONS: dict[str, Convention] = {
    c.name: c
    for c in (
        Convention(
            "default",
            "seed / LoRA paper: 8 tasks, MRPC/QQP accuracy, STS-B Pearson, MNLI pooled accuracy",
            {
                "cola": ("cola_mcc",), "sst2": ("sst2_accuracy",), "mrpc": ("mrpc_accuracy",),
                "qqp": ("qqp_accuracy",), "stsb": ("stsb_pearson",), "mnli": ("mnli_accuracy",),
                "qnli": ("qnli_accuracy",), "rte": ("rte_accuracy",),
            },
        ),
        Convention(
            "leaderboard",
            "GLUE leaderboard: 9 tasks incl. WNLI, MRPC/QQP mean(F1, acc), STS-B mean(Pearson, "
            "Spearman), MNLI mean(m, mm)",
            {
                "cola": ("cola_mcc",), "sst2": ("sst2_accuracy",),
                "mrpc": ("mrpc_f1", "mrpc_accuracy"), "qqp": ("qqp_f1", "qqp_accuracy"),
                "stsb": ("stsb_pearson", "stsb_spearman"),
                "mnli": ("mnli_matched_accuracy", "mnli_mismatched_accuracy"),
                "qnli": ("qnli_accuracy",), "rte": ("rte_accuracy",), "wnli": ("wnli_accuracy",),
            },
        ),
        Convention(
            "bert_paper",
            "BERT paper Table 1: 8 tasks with MNLI-m and MNLI-mm as two entries, MRPC/QQP F1, "
            "STS-B Spearman",
            {
                "mnli_matched": ("mnli_matched_accuracy",),
                "mnli_mismatched": ("mnli_mismatched_accuracy",),
                "qqp": ("qqp_f1",), "qnli": ("qnli_accuracy",), "sst2": ("sst2_accuracy",),
                "cola": ("cola_mcc",), "stsb": ("stsb_spearman",), "mrpc": ("mrpc_f1",),
                "rte": ("rte_accuracy",),
            },
        ),
    )
}


def primary_metric(task: str) -> str:
    """The metric a task contributes to the default GLUE average (``mcc``, ``pearson``, ``accuracy``)."""
    keys = CONVENTIONS["default"].entries.get(task)
    return keys[0].split("_", 1)[1] if keys else "accuracy"


def chance_score(task: str, references: Sequence) -> float:
    """The task's primary metric for a model that answers the majority class on every row: the
    majority share for accuracy, 0 for MCC and Pearson (a constant predictor has no correlation).
    A score at or below this is "not above chance"."""
    metric = primary_metric(task)
    if metric != "accuracy":
        return 0.0
    counts = np.bincount(np.asarray(_checked_values(task, "reference", references, GLUE_TASKS[task].num_labels)))
    return float(counts.max() / counts.sum())


def get_convention(name: str) -> Convention:
    try:
        return CONVENTIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown GLUE-average convention {name!r}; valid conventions are: {', '.join(CONVENTIONS)}"
        ) from None


@dataclass(frozen=True)
class GlueAverage:
    """A GLUE average with the facts needed to print it honestly."""

    convention: str
    value: float | None
    """The full average, or None when a task of the convention is missing."""
    partial_value: float | None
    """The mean over the entries that are present (equals ``value`` when complete)."""
    entries: dict[str, float] = field(default_factory=dict)
    missing_tasks: list[str] = field(default_factory=list)

    @property
    def is_complete(self) -> bool:
        return not self.missing_tasks

    def label(self) -> str:
        """How to title this number in a table: says the convention and any tasks left out."""
        if self.is_complete:
            return f"GLUE average ({self.convention})"
        return (f"partial GLUE average ({self.convention}) over {', '.join(self.entries)}; "
                f"missing {', '.join(self.missing_tasks)}")


def glue_average(flat: Mapping[str, float], convention: str = "default") -> GlueAverage:
    """Average flat per-task metrics under a named convention; partial when tasks are missing."""
    conv = get_convention(convention)
    entries: dict[str, float] = {}
    missing: set[str] = set()
    for entry, keys in conv.entries.items():
        if all(k in flat for k in keys):
            entries[entry] = float(np.mean([flat[k] for k in keys]))
        else:
            missing.update(key_task(k) for k in keys if k not in flat)
    partial = float(np.mean(list(entries.values()))) if entries else None
    return GlueAverage(
        convention=conv.name,
        value=partial if not missing else None,
        partial_value=partial,
        entries=entries,
        missing_tasks=sorted(missing),
    )
