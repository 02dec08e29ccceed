"""What the GLUE server (gluebenchmark.com) takes: one tab-separated file per task, named as below,
with the header ``index<TAB>prediction`` and one row per test example in the test file's order, the
``index`` being the example's number in that file; all eleven files zipped flat into one archive.

The prediction is written as the server reads it: the label's name for the NLI tasks (MNLI-m,
MNLI-mm, QNLI, RTE and the diagnostic AX), 0/1 for CoLA, SST-2, MRPC, QQP and WNLI, and a number for
STS-B. ``transformers``' ``run_glue.py`` writes the same header and label names per task. STS-B
scores are written with every digit (``repr``), so a file read back scores exactly as the predictions
it was written from.
"""

from __future__ import annotations

from dataclasses import dataclass

from glue_sparse_tasks.glue_tasks import get_task
from glue_sparse_tasks.tasks.utils import TEST_SOURCES

HEADER = ("index", "prediction")
ZIP_NAME = "submission.zip"


@dataclass(frozen=True)
class SubmissionFile:
    """One file of a submission."""

    name: str
    """The file name the server expects."""
    glue_task: str
    """The ``glue_task`` whose docs it answers (``glue_sparse_<glue_task>`` / ``glue_sparse_<glue_task>_test``)."""
    written_as: str
    """``names``: the label's name; ``ids``: the label id (0/1); ``score``: a number."""

    @property
    def data_task(self) -> str:
        """The data-layer task of its rows (``ax`` for the diagnostic set), as its test split names it."""
        return TEST_SOURCES[self.glue_task][0]

    def text(self, prediction: int | float) -> str:
        """The prediction as the server reads it."""
        if self.written_as == "score":
            return repr(float(prediction))
        label = int(prediction)
        return get_task(self.data_task).label_names[label] if self.written_as == "names" else str(label)


SUBMISSION_FILES: tuple[SubmissionFile, ...] = (
    SubmissionFile("CoLA.tsv", "cola", "ids"),
    SubmissionFile("SST-2.tsv", "sst2", "ids"),
    SubmissionFile("MRPC.tsv", "mrpc", "ids"),
    SubmissionFile("STS-B.tsv", "stsb", "score"),
    SubmissionFile("QQP.tsv", "qqp", "ids"),
    SubmissionFile("MNLI-m.tsv", "mnli_matched", "names"),
    SubmissionFile("MNLI-mm.tsv", "mnli_mismatched", "names"),
    SubmissionFile("QNLI.tsv", "qnli", "names"),
    SubmissionFile("RTE.tsv", "rte", "names"),
    SubmissionFile("WNLI.tsv", "wnli", "ids"),
    SubmissionFile("AX.tsv", "ax", "names"),
)
BY_GLUE_TASK = {f.glue_task: f for f in SUBMISSION_FILES}
