"""Readers for the local GLUE layouts: JSONL(.gz), HF parquet exports and the original GLUE TSVs.

Each reader turns one split file into raw rows with HF ``nyu-mll/glue`` field names, each paired
with a location string (``file:line``) so that validation errors can point at the bad row.
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from glue_sparse_tasks.errors import UserInputError
from glue_sparse_tasks.glue_tasks import GlueTask

Row = dict[str, object]
LocatedRow = tuple[str, Row]


class GlueDataError(UserInputError):
    """Local or remote GLUE data is missing or malformed; the message says where and why."""


class GlueSplitNotFound(GlueDataError):
    """No source holds the split (as opposed to a source that holds it but is malformed)."""


@dataclass(frozen=True)
class SplitFile:
    """A candidate source for one split (one file, or the shards of a parquet export)."""

    paths: tuple[Path, ...]
    reader: Callable[[Path, GlueTask], Iterator[LocatedRow]]
    kind: str

    def exists(self) -> bool:
        return all(p.is_file() for p in self.paths)

    def read(self, task: GlueTask) -> Iterator[LocatedRow]:
        for path in self.paths:
            yield from self.reader(path, task)

    def describe(self, root: Path | None = None) -> str:
        """The file (and shard count); relative to ``root`` when given, so records stay machine-independent."""
        first = self.paths[0].relative_to(root).as_posix() if root is not None else str(self.paths[0])
        return first if len(self.paths) == 1 else f"{first} (+{len(self.paths) - 1} shards)"


# -- JSONL -----------------------------------------------------------------------------------

def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of a UTF-8 text file, ``.gz`` too; a leading byte-order mark is dropped.
    Undecodable bytes and truncated or corrupt gzip streams raise ``GlueDataError`` naming the file
    and the line reached, instead of a bare decoder or gzip error."""
    opener = gzip.open if path.name.endswith(".gz") else open
    lineno = 0
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="") as fh:
            for lineno, line in enumerate(fh, start=1):
                yield lineno, line
    except UnicodeDecodeError as exc:
        bad_byte = exc.object[exc.start:exc.start + 1]
        raise GlueDataError(f"{path}: not UTF-8 text at or after line {lineno + 1} (byte {bad_byte!r} "
                            f"at offset {exc.start} of the block being decoded); re-save the file as UTF-8") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise GlueDataError(f"{path}: truncated or corrupt gzip file after line {lineno} ({exc}); "
                            "download or compress it again") from None


def iter_jsonl_objects(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line of a JSON Lines file (``.gz`` too)."""
    for lineno, line in text_lines(path):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise GlueDataError(f"{path}:{lineno}: malformed JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise GlueDataError(f"{path}:{lineno}: expected a JSON object per line, got {type(row).__name__}")
        yield lineno, row


def read_jsonl(path: Path, task: GlueTask) -> Iterator[LocatedRow]:
    for lineno, row in iter_jsonl_objects(path):
        yield f"{path}:{lineno}", row


# -- parquet ---------------------------------------------------------------------------------

def read_parquet(path: Path, task: GlueTask) -> Iterator[LocatedRow]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise GlueDataError(f"{path}: not a readable parquet file ({exc})") from None
    for i, row in enumerate(table.to_pylist()):
        yield f"{path}:row {i}", row


# -- original GLUE TSV -----------------------------------------------------------------------

TSV_FOLDERS = {
    "cola": "CoLA", "sst2": "SST-2", "mrpc": "MRPC", "qqp": "QQP", "stsb": "STS-B",
    "mnli": "MNLI", "qnli": "QNLI", "rte": "RTE", "wnli": "WNLI", "ax": "diagnostic",
}
TSV_FILES = {
    "train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv",
    "validation_matched": "dev_matched.tsv", "validation_mismatched": "dev_mismatched.tsv",
    "test_matched": "test_matched.tsv", "test_mismatched": "test_mismatched.tsv",
}
_NLI_LABELS = {"entailment": 0, "neutral": 1, "contradiction": 2}
_BINARY_NLI_LABELS = {"entailment": 0, "not_entailment": 1}
# Header name in the GLUE TSV -> HF field name, per task (headered files only).
_TSV_RENAMES: dict[str, dict[str, str]] = {
    "sst2": {"sentence": "sentence", "label": "label"},
    "mrpc": {"#1 String": "sentence1", "#2 String": "sentence2", "Quality": "label"},
    "qqp": {"question1": "question1", "question2": "question2", "is_duplicate": "label"},
    "stsb": {"sentence1": "sentence1", "sentence2": "sentence2", "score": "label"},
    "mnli": {"sentence1": "premise", "sentence2": "hypothesis", "gold_label": "label"},
    "qnli": {"question": "question", "sentence": "sentence", "label": "label"},
    "rte": {"sentence1": "sentence1", "sentence2": "sentence2", "label": "label"},
    "wnli": {"sentence1": "sentence1", "sentence2": "sentence2", "label": "label"},
    "ax": {"sentence1": "premise", "sentence2": "hypothesis"},
}
#: the column of a test TSV that numbers its rows (the ``index`` of a submission file); QQP calls it ``id``
TSV_INDEX_COLUMNS = ("index", "id")
#: files whose name is not ``TSV_FILES[split]``: GLUE ships the diagnostic set as diagnostic/diagnostic.tsv
TSV_SPECIAL_FILES = {("ax", "test"): "diagnostic.tsv"}


def _tsv_label(task: GlueTask, raw: str | None, where: str) -> object:
    if raw is None or raw == "":
        return -1  # unlabelled test rows, as in HF
    if task.name in ("mnli", "ax"):
        table = _NLI_LABELS
    elif task.name in ("qnli", "rte"):
        table = _BINARY_NLI_LABELS
    else:
        table = None
    try:
        if table is not None:
            return table[raw]
        return float(raw) if task.is_regression else int(raw)
    except (KeyError, ValueError):
        raise GlueDataError(
            f"{where}: label {raw!r} is not valid for {task.name}; expected {task.label_range()}"
        ) from None


def read_glue_tsv(path: Path, task: GlueTask) -> Iterator[LocatedRow]:
    """Read an original GLUE TSV (``csv.QUOTE_NONE``: GLUE quotes are part of the text)."""
    csv.field_size_limit(sys.maxsize)
    lines = (line for _, line in text_lines(path))
    reader = csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    if task.name == "cola" and path.name != "test.tsv":
        # CoLA train/dev have no header: source, label, original label, sentence.
        for i, fields in enumerate(reader):
            where = f"{path}:{i + 1}"
            if len(fields) != 4:
                raise GlueDataError(
                    f"{where}: expected 4 tab-separated CoLA fields "
                    f"(source, label, original_label, sentence), got {len(fields)}"
                )
            yield where, {"sentence": fields[3], "label": _tsv_label(task, fields[1], where),
                          "idx": i}
        return
    header = next(reader, None)
    if header is None:
        return
    renames = _TSV_RENAMES.get(task.name, {"sentence": "sentence"})
    numbered = path.name.startswith(("test", "diagnostic"))  # test files number their rows in a column
    index_column = next((c for c in TSV_INDEX_COLUMNS if c in header), None) if numbered else None
    missing = [h for h, f in renames.items() if h not in header and f != "label"]
    if missing:
        raise GlueDataError(
            f"{path}:1: header lacks column(s) {missing} expected for GLUE {task.name}; "
            f"header is {header}"
        )
    for i, fields in enumerate(reader):
        where = f"{path}:{i + 2}"
        if len(fields) != len(header):
            raise GlueDataError(
                f"{where}: expected {len(header)} tab-separated fields, got {len(fields)}"
            )
        record = dict(zip(header, fields))
        row: Row = {f: record[h] for h, f in renames.items() if f != "label"}
        label_header = next((h for h, f in renames.items() if f == "label"), None)
        row["label"] = _tsv_label(task, record.get(label_header) if label_header else None, where)
        index = record[index_column] if index_column else None
        try:
            row["idx"] = i if index is None else int(index)
        except ValueError:
            raise GlueDataError(f"{where}: index {index!r} is not an integer (a GLUE test file numbers its rows "
                                "in its first column)") from None
        yield where, row


def candidate_files(folder: Path, task: GlueTask, split: str) -> list[SplitFile]:
    """Every file, in every supported layout, that could hold ``split`` of ``task`` under ``folder``."""
    task_dir = folder / task.name
    shards = tuple(sorted(task_dir.glob(f"{split}-*-of-*.parquet"))) if task_dir.is_dir() else ()
    out = [
        SplitFile((task_dir / f"{split}.jsonl",), read_jsonl, "jsonl"),
        SplitFile((task_dir / f"{split}.jsonl.gz",), read_jsonl, "jsonl.gz"),
        SplitFile(shards or (task_dir / f"{split}-00000-of-00001.parquet",), read_parquet, "parquet"),
    ]
    if split in TSV_FILES:
        tsv = folder / TSV_FOLDERS[task.name] / TSV_SPECIAL_FILES.get((task.name, split), TSV_FILES[split])
        out.append(SplitFile((tsv,), read_glue_tsv, "tsv"))
    return out
