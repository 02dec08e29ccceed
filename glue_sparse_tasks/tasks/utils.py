"""Functions the ``glue_sparse_*`` task YAMLs point at with ``!function``.

Data comes from the package's data layer; every aggregation is a thin call into
``glue_sparse_tasks.scoring`` (no bootstrap: lm-eval only bootstraps its own registered metrics).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from glue_sparse_tasks import scoring
from glue_sparse_tasks.data import load_glue_split
from glue_sparse_tasks.glue_tasks import MNLI_SOURCE_COLUMN, POOLED_SPLIT
from glue_sparse_tasks.local_formats import GlueDataError

# lm-eval task's glue_task -> (data-layer task, split); other tasks read ("<task>", "validation").
_SOURCES = {
    "mnli": ("mnli", POOLED_SPLIT),
    "mnli_matched": ("mnli", "validation_matched"),
    "mnli_mismatched": ("mnli", "validation_mismatched"),
}

# Per-doc values each task emits; must equal the metric names of its YAML's metric_list.
TASK_METRICS: dict[str, tuple[str, ...]] = {
    "cola": ("acc", "mcc", "glue_score"),
    "sst2": ("acc", "glue_score"),
    "mrpc": ("acc", "f1", "glue_score"),
    "qqp": ("acc", "f1", "glue_score"),
    "stsb": ("pearson", "spearman", "glue_score"),
    "mnli": ("acc", "acc_matched", "acc_mismatched", "glue_score"),
    "mnli_matched": ("acc", "glue_score"),
    "mnli_mismatched": ("acc", "glue_score"),
    "qnli": ("acc", "glue_score"),
    "rte": ("acc", "glue_score"),
    "wnli": ("acc", "glue_score"),
}



def data_source(glue_task: str, split: str = "validation") -> tuple[str, str]:
    """The data-layer (task, split) behind a task's ``glue_task`` name: the split it is scored on, or
    (``split="test"``) the test split its ``glue_sparse_<glue_task>_test`` variant predicts."""
    return TEST_SOURCES[glue_task] if split == "test" else _SOURCES.get(glue_task, (glue_task, "validation"))


def answering_task(glue_task: str) -> str:
    """The GLUE task whose fine-tuned model answers ``glue_task``'s docs (AX is answered by MNLI's)."""
    return "mnli" if glue_task == "ax" else data_source(glue_task)[0]


#: glue_task -> (data-layer task, test split) of the ``glue_sparse_<task>_test`` variants (``ax``: GLUE's
#: diagnostic set, answered as MNLI); their few-shot examples come from ``data_source(FEWSHOT_OF...)``
TEST_SOURCES = {
    **{task: (task, "test") for task in ("cola", "sst2", "mrpc", "qqp", "stsb", "qnli", "rte", "wnli")},
    "mnli_matched": ("mnli", "test_matched"),
    "mnli_mismatched": ("mnli", "test_mismatched"),
    "ax": ("ax", "test"),
}
FEWSHOT_OF = {"ax": "mnli_matched"}


def _docs(glue_task: str, task: str, split: str, data_dir: str | None):
    try:
        ds = load_glue_split(task, split, data_dir=data_dir)
    except GlueDataError as exc:
        raise GlueDataError(f"lm-eval task glue_sparse_{glue_task}: {exc}") from None
    return ds.add_column("glue_task", [glue_task] * len(ds))


def load_docs(glue_task: str, data_dir: str | None = None, glue_split: str = "validation", **_metadata) -> dict:
    """``custom_dataset`` hook: the task's docs, with a ``glue_task`` column.

    ``glue_split: test`` (the ``_test`` variants): the unlabelled test docs under ``test`` and, for few-shot
    examples, the labelled validation docs under ``validation`` (none when that split is not at hand: a
    zero-shot run needs none). ``data_dir`` comes from ``--metadata '{"data_dir": ...}'``; otherwise the
    data layer falls back to ``$GLUE_SPARSE_DATA_DIR`` and then the Hub. Other metadata is ignored.
    """
    if glue_split != "test":
        return {"validation": _docs(glue_task, *data_source(glue_task), data_dir)}
    test = _docs(glue_task, *data_source(glue_task, "test"), data_dir)
    shots_of = FEWSHOT_OF.get(glue_task, glue_task)
    try:
        shots = _docs(glue_task, *data_source(shots_of), data_dir)
    except GlueDataError:
        shots = test.select([])
    return {"test": test, "validation": shots}


def stsb_target(doc: dict) -> int:
    """The choice nearest the gold similarity (only used for few-shot examples)."""
    return int(round(float(doc["label"])))


def _softmax(logliks: Sequence[float]) -> list[float]:
    top = max(logliks)
    exps = [math.exp(x - top) for x in logliks]
    total = sum(exps)
    return [e / total for e in exps]


def prediction(glue_task: str, logliks: Sequence[float]) -> int | float:
    """A doc's prediction from its choices' log-likelihoods, the one rule every reader uses (the metrics
    below and ``glue-sparse predict``): the argmax choice; for STS-B the expected value
    Σ p_i·i over the normalised probabilities of the choices "0".."5"."""
    if glue_task == "stsb":
        return sum(i * p for i, p in enumerate(_softmax(logliks)))
    return max(range(len(logliks)), key=logliks.__getitem__)


def bypass_results(doc: dict, results: Sequence[tuple[float, bool]]) -> dict:
    """The ``_test`` variants' per-doc value: nothing to score (no labels); their predictions are read from
    lm-eval's ``--log_samples`` output (``glue-sparse predict``)."""
    return {"bypass": None}


def process_results(doc: dict, results: Sequence[tuple[float, bool]]) -> dict:
    """Turn one doc's choice log-likelihoods into the per-doc values its metrics aggregate.

    Classification: the argmax choice is the prediction. STS-B: the expected value
    Σ p_i·i over the normalised probabilities of the choices "0".."5".
    """
    task = doc["glue_task"]
    pred = prediction(task, [float(r[0]) for r in results])
    gold = doc["label"]
    if task == "stsb":
        pair = (pred, float(gold))
        return {name: pair for name in TASK_METRICS[task]}
    out: dict = {"acc": float(pred == gold)}
    for name in TASK_METRICS[task][1:]:
        out[name] = (pred, int(gold), doc.get(MNLI_SOURCE_COLUMN))
    return out


def _split(items: Sequence[tuple]) -> tuple[list, list]:
    return [it[0] for it in items], [it[1] for it in items]


def accuracy(items: Sequence[tuple]) -> float:
    return scoring.accuracy(*_split(items))


def f1(items: Sequence[tuple]) -> float:
    return scoring.binary_f1(*_split(items))


def mcc(items: Sequence[tuple]) -> float:
    return scoring.mcc(*_split(items))


def pearson(items: Sequence[tuple]) -> float:
    return scoring.pearson(*_split(items))


def spearman(items: Sequence[tuple]) -> float:
    return scoring.spearman(*_split(items))


def _accuracy_of(source: str, items: Sequence[tuple]) -> float:
    part = [it for it in items if it[2] == source]
    return scoring.accuracy(*_split(part)) if part else math.nan


def accuracy_matched(items: Sequence[tuple]) -> float:
    return _accuracy_of("matched", items)


def accuracy_mismatched(items: Sequence[tuple]) -> float:
    return _accuracy_of("mismatched", items)
