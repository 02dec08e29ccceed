"""The GLUE task catalogue: field names, label spaces and splits, as in HF `nyu-mll/glue`.

Every other module (data layer, scoring, lm-eval tasks, fine-tuning) reads task facts from here.
"""

from __future__ import annotations

from dataclasses import dataclass

POOLED_SPLIT = "validation"
"""MNLI's pooled split: matched then mismatched, with a ``mnli_source`` column."""

MNLI_SOURCE_COLUMN = "mnli_source"


@dataclass(frozen=True)
class GlueTask:
    """Static facts about one GLUE task."""

    name: str
    text_fields: tuple[str, ...]
    label_names: tuple[str, ...]
    """Names of the label ids in order; empty for the STS-B regression task."""
    splits: tuple[str, ...]
    is_regression: bool = False

    @property
    def num_labels(self) -> int:
        """Outputs of a classifier head for this task (1 for regression)."""
        return 1 if self.is_regression else len(self.label_names)

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.text_fields, "label", "idx")

    def label_is_valid(self, value: object) -> bool:
        """True when ``value`` is a legal gold label (STS-B: a number in [0, 5])."""
        if isinstance(value, bool):
            return False
        if self.is_regression:
            return isinstance(value, (int, float)) and 0.0 <= float(value) <= 5.0
        return isinstance(value, int) and 0 <= value < len(self.label_names)

    def label_range(self) -> str:
        """Human-readable description of legal labels, for error messages."""
        if self.is_regression:
            return "a number in [0, 5]"
        return f"an integer in 0..{len(self.label_names) - 1} ({', '.join(self.label_names)})"


_STANDARD_SPLITS = ("train", "validation", "test")

GLUE_TASKS: dict[str, GlueTask] = {
    t.name: t
    for t in (
        GlueTask("cola", ("sentence",), ("unacceptable", "acceptable"), _STANDARD_SPLITS),
        GlueTask("sst2", ("sentence",), ("negative", "positive"), _STANDARD_SPLITS),
        GlueTask("mrpc", ("sentence1", "sentence2"), ("not_equivalent", "equivalent"), _STANDARD_SPLITS),
        GlueTask("qqp", ("question1", "question2"), ("not_duplicate", "duplicate"), _STANDARD_SPLITS),
        GlueTask("stsb", ("sentence1", "sentence2"), (), _STANDARD_SPLITS, is_regression=True),
        GlueTask(
            "mnli",
            ("premise", "hypothesis"),
            ("entailment", "neutral", "contradiction"),
            ("train", "validation_matched", "validation_mismatched", POOLED_SPLIT,
             "test_matched", "test_mismatched"),
        ),
        GlueTask("qnli", ("question", "sentence"), ("entailment", "not_entailment"), _STANDARD_SPLITS),
        GlueTask("rte", ("sentence1", "sentence2"), ("entailment", "not_entailment"), _STANDARD_SPLITS),
        GlueTask("wnli", ("sentence1", "sentence2"), ("not_entailment", "entailment"), _STANDARD_SPLITS),
    )
}

GLUE8: tuple[str, ...] = ("cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte")
"""The eight tasks of the default GLUE average (no WNLI)."""

AX = GlueTask("ax", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"), ("test",))
"""GLUE's diagnostic set (``nyu-mll/glue`` config ``ax``): a test split only, unlabelled, predicted by the
MNLI model for the server; no training or scoring here, so it is not one of ``GLUE_TASKS``."""

DIAGNOSTIC_TASKS: dict[str, GlueTask] = {AX.name: AX}


def get_task(name: str) -> GlueTask:
    """Look a task up by name (a GLUE task or the diagnostic ``ax``), with an error that lists the names."""
    try:
        return GLUE_TASKS.get(name) or DIAGNOSTIC_TASKS[name]
    except KeyError:
        raise ValueError(
            f"unknown GLUE task {name!r}; valid tasks are: {', '.join([*GLUE_TASKS, *DIAGNOSTIC_TASKS])}"
        ) from None


def check_split(task: GlueTask, split: str) -> None:
    if split not in task.splits:
        raise ValueError(
            f"unknown split {split!r} for GLUE task {task.name!r}; valid splits are: "
            f"{', '.join(task.splits)}"
        )


def evaluation_split(task: str) -> str:
    """The split a task is scored on, everywhere (fine-tuning, the bench, lm-eval): ``validation``;
    for MNLI that is the pooled matched + mismatched set (``POOLED_SPLIT``)."""
    return POOLED_SPLIT if task == "mnli" else "validation"
