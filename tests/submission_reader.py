"""An independent reader of GLUE-server submission files, for the round trip of ``glue-sparse predict``
(``tests/test_predict.py``, ``benchmarks/predict_round_trip.py``).

The server's format, as the GLUE site's submission instructions and ``transformers``' ``run_glue.py``
give it, is written out here again on purpose (never imported from the package): a tab-separated
``index<TAB>prediction`` header, one row per test example with its ``index``, the label's name for the
NLI tasks, 0/1 elsewhere, a number for STS-B, eleven files zipped flat. Scores come from
``glue_sparse_tasks.scoring`` on the predictions read back and the labelled data joined by index.
"""

from __future__ import annotations

from pathlib import Path

from glue_sparse_tasks import scoring
from glue_sparse_tasks.data import load_glue_rows

NLI3 = {"entailment": 0, "neutral": 1, "contradiction": 2}
NLI2 = {"entailment": 0, "not_entailment": 1}
BINARY = {"0": 0, "1": 1}
#: file -> (task as scoring names it, data (task, validation split, test split), label strings -> ids or float)
SERVER_FORMAT = {
    "CoLA.tsv": ("cola", ("cola", "validation", "test"), BINARY),
    "SST-2.tsv": ("sst2", ("sst2", "validation", "test"), BINARY),
    "MRPC.tsv": ("mrpc", ("mrpc", "validation", "test"), BINARY),
    "STS-B.tsv": ("stsb", ("stsb", "validation", "test"), float),
    "QQP.tsv": ("qqp", ("qqp", "validation", "test"), BINARY),
    "MNLI-m.tsv": ("mnli_matched", ("mnli", "validation_matched", "test_matched"), NLI3),
    "MNLI-mm.tsv": ("mnli_mismatched", ("mnli", "validation_mismatched", "test_mismatched"), NLI3),
    "QNLI.tsv": ("qnli", ("qnli", "validation", "test"), NLI2),
    "RTE.tsv": ("rte", ("rte", "validation", "test"), NLI2),
    "WNLI.tsv": ("wnli", ("wnli", "validation", "test"), BINARY),
    "AX.tsv": ("ax", ("ax", None, "test"), NLI3),
}


def read_server_file(path: Path) -> list[tuple[int, int | float]]:
    """(index, prediction) rows of one file, as the server would parse it; anything else fails."""
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[0] == "index\tprediction", f"{path.name}: header {lines[0]!r}"
    assert lines[-1] == "", f"{path.name}: no final newline"
    mapping = SERVER_FORMAT[path.name][2]
    rows = []
    for line in lines[1:-1]:
        index, value = line.split("\t")
        rows.append((int(index), float(value) if mapping is float else mapping[value]))
    return rows


def score_submission(folder: Path, data_dir: Path) -> dict[str, dict[str, float]]:
    """Each file's metrics, from the files alone plus the labelled validation data joined by index."""
    out = {}
    for name, (task, (data_task, split, _), _) in SERVER_FORMAT.items():
        if not (folder / name).exists() or split is None:
            continue
        gold = {r["idx"]: r["label"] for r in load_glue_rows(data_task, split, data_dir, use_hub=False)[0]}
        rows = read_server_file(folder / name)
        out[task] = scoring.task_metrics(task, [p for _, p in rows], [gold[i] for i, _ in rows])
    return out
