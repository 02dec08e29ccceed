"""The GLUE data layer: one function loads any task split, offline first.

Sources are tried in order: an explicit ``data_dir``, then ``$GLUE_SPARSE_DATA_DIR``, then the
Hugging Face Hub (``nyu-mll/glue``). Rows come back as a ``datasets.Dataset`` with the Hub's field
names and label ids, validated, and stamped with a sha256 fingerprint of exactly the rows used.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from glue_sparse_tasks.glue_tasks import (
    MNLI_SOURCE_COLUMN,
    POOLED_SPLIT,
    GlueTask,
    check_split,
    get_task,
)
from glue_sparse_tasks.local_formats import GlueDataError, GlueSplitNotFound, LocatedRow, Row, candidate_files

DATA_DIR_ENV = "GLUE_SPARSE_DATA_DIR"
HUB_DATASET = "nyu-mll/glue"
LIMITED_TRAIN_ROWS = 10_000
"""The limited-data regime: the first N training rows in stored order."""

_PROVENANCE_TAG = "glue_sparse provenance: "
_hub_unreachable: str | None = None
"""Set after a connection failure, so one offline process pays the Hub time-out once."""


@dataclass(frozen=True)
class SplitProvenance:
    """Where a loaded split came from and what exactly it holds."""

    task: str
    split: str
    source: str
    rows: int
    sha256: str
    limit: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _hub_offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes")
               for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _glue_root(folder: Path) -> Path:
    """Accept both the GLUE folder itself and a parent holding ``glue/`` (as ``shared/data``)."""
    return folder / "glue" if (folder / "glue").is_dir() else folder


def data_dirs(data_dir: str | os.PathLike | None = None) -> list[tuple[str, Path]]:
    """The local folders to search, labelled by where they came from, in search order."""
    out = []
    if data_dir:
        out.append(("data_dir", Path(data_dir).expanduser()))
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        out.append((f"${DATA_DIR_ENV}", Path(env).expanduser()))
    return out


def _validate(task: GlueTask, split: str, located: Iterable[LocatedRow]) -> list[Row]:
    rows: list[Row] = []
    allow_unlabelled = split.startswith("test")
    for where, raw in located:
        missing = [c for c in task.columns if c not in raw]
        if missing:
            raise GlueDataError(
                f"{where}: missing column(s) {missing} for GLUE {task.name}; "
                f"expected columns {list(task.columns)}, found {sorted(raw)}"
            )
        label = raw["label"]
        if not (task.label_is_valid(label) or (allow_unlabelled and label == -1)):
            raise GlueDataError(
                f"{where}: label {label!r} is out of range for {task.name}; "
                f"expected {task.label_range()}"
            )
        for f in task.text_fields:
            if not isinstance(raw[f], str):
                raise GlueDataError(f"{where}: field {f!r} must be a string, got {raw[f]!r}")
        row: Row = {f: raw[f] for f in task.text_fields}
        row["label"] = float(label) if task.is_regression else int(label)
        row["idx"] = int(raw["idx"])
        rows.append(row)
    return rows


def _read_local(
    task: GlueTask, split: str, folder: Path, label: str, looked: list[str]
) -> tuple[list[Row], str] | None:
    root = _glue_root(folder)
    for candidate in candidate_files(root, task, split):
        if candidate.exists():
            rows = _validate(task, split, candidate.read(task))
            if not rows:
                raise GlueDataError(f"{candidate.describe()}: split {task.name}/{split} is empty")
            # provenance names the file inside the GLUE folder, never this machine's path to it
            return rows, f"local:{candidate.describe(root)}"
        looked.append(f"{label}: {candidate.paths[0]}")
    return None


def _read_hub(task: GlueTask, split: str, looked: list[str]) -> tuple[list[Row], str] | None:
    where = f"Hub {HUB_DATASET} ({task.name}/{split})"
    if _hub_offline():
        looked.append(f"{where}: skipped, HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set")
        return None
    global _hub_unreachable
    if _hub_unreachable:
        looked.append(f"{where}: skipped, the Hub was unreachable earlier in this process "
                      f"({_hub_unreachable})")
        return None
    import datasets

    try:
        ds = datasets.load_dataset(HUB_DATASET, task.name, split=split)
    except Exception as exc:  # offline, missing split, auth: all mean "not here"
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if "Connection" in type(exc).__name__ or "Couldn't reach" in str(exc) or "Timeout" in reason:
            _hub_unreachable = reason  # don't wait for the same time-out once per split
        looked.append(f"{where}: {reason}")
        return None
    located = ((f"{where} row {i}", dict(r)) for i, r in enumerate(ds))
    return _validate(task, split, located), f"hub:{HUB_DATASET}"


def _read_split(task: GlueTask, split: str, data_dir, use_hub: bool) -> tuple[list[Row], str]:
    looked: list[str] = []
    for label, folder in data_dirs(data_dir):
        if not folder.is_dir():
            looked.append(f"{label}={folder}: not a directory")
            continue
        found = _read_local(task, split, folder, label, looked)
        if found:
            return found
    if not data_dirs(data_dir):
        looked.append(f"no local folder: neither data_dir nor ${DATA_DIR_ENV} is set")
    if use_hub:
        found = _read_hub(task, split, looked)
        if found:
            return found
    else:
        looked.append(f"Hub {HUB_DATASET}: not asked (use_hub=False)")
    places = "\n  - ".join(looked)
    given = ", ".join(f"{label}={folder}" for label, folder in data_dirs(data_dir)) or "no data folder given"
    raise GlueSplitNotFound(
        f"GLUE split {task.name}/{split} was not found ({given}). Looked in:\n  - {places}\n"
        f"Point at local data with --data-dir DIR (Python: data_dir=DIR; lm-eval: "
        f"--metadata '{{\"data_dir\": \"DIR\"}}') or ${DATA_DIR_ENV}=DIR, where DIR holds "
        f"<task>/<split>.jsonl[.gz], <task>/<split>-00000-of-00001.parquet or the GLUE TSV folders."
    )


def fingerprint(rows: Iterable[Row]) -> str:
    """sha256 over the canonical JSON of each row, in order: equal rows give equal hashes."""
    h = hashlib.sha256()
    for row in rows:
        h.update(json.dumps(row, sort_keys=True, ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def content_dataset(columns: dict[str, list], sha256: str | None = None, features=None, info=None):
    """A ``datasets.Dataset`` named by the sha256 of its content (``sha256``, or computed here over the columns).

    ``datasets`` otherwise names a new dataset by pickling it with dill, which pickles a module by value when
    its file lies outside the interpreter's prefixes (dependencies linked in from another environment) and then
    fails; our own content hash needs no pickling (for a GLUE split, the rows' sha256 ``provenance()`` reports).
    """
    import datasets
    import pyarrow as pa

    if sha256 is None:
        digest = hashlib.sha256()
        for name in sorted(columns):
            digest.update(json.dumps([name, columns[name]], ensure_ascii=False).encode("utf-8"))
        sha256 = digest.hexdigest()
    if features is None:
        table = pa.Table.from_pydict(columns)
        features = datasets.Features.from_arrow_schema(table.schema)
    else:
        table = pa.Table.from_pydict(features.encode_batch(columns), schema=features.arrow_schema)
    info = info if info is not None else datasets.DatasetInfo()
    info.features = features
    return datasets.Dataset(table, info=info, fingerprint=sha256)


def _features(task: GlueTask, pooled: bool):
    import datasets

    feats = {f: datasets.Value("string") for f in task.text_fields}
    feats["label"] = (datasets.Value("float64") if task.is_regression
                      else datasets.ClassLabel(names=list(task.label_names)))
    feats["idx"] = datasets.Value("int64")
    if pooled:
        feats[MNLI_SOURCE_COLUMN] = datasets.Value("string")
    return datasets.Features(feats)


def load_glue_rows(
    task: str,
    split: str,
    data_dir: str | os.PathLike | None = None,
    limit: int | None = None,
    use_hub: bool = True,
) -> tuple[list[Row], SplitProvenance]:
    """Rows of one split as plain dicts, plus their provenance (the work behind ``load_glue_split``)."""
    spec = get_task(task)
    check_split(spec, split)
    if limit is not None and limit <= 0:
        raise ValueError(f"limit must be a positive number of rows, got {limit}")
    if spec.name == "mnli" and split == POOLED_SPLIT:
        rows: list[Row] = []
        sources = []
        for part in ("matched", "mismatched"):
            part_rows, src = _read_split(spec, f"validation_{part}", data_dir, use_hub)
            rows += [{**r, MNLI_SOURCE_COLUMN: part} for r in part_rows]
            sources.append(src)
        source = " + ".join(sources)
    else:
        rows, source = _read_split(spec, split, data_dir, use_hub)
    if limit is not None:
        rows = rows[:limit]
    prov = SplitProvenance(spec.name, split, source, len(rows), fingerprint(rows), limit)
    return rows, prov


def load_glue_split(
    task: str,
    split: str,
    data_dir: str | os.PathLike | None = None,
    limit: int | None = None,
    use_hub: bool = True,
):
    """Load one GLUE split as a ``datasets.Dataset`` with HF ``nyu-mll/glue`` fields and label ids.

    ``split`` may be MNLI's ``validation`` (matched then mismatched, pooled, with a
    ``mnli_source`` column). ``limit`` keeps the first N rows in stored order (the limited-data
    regime uses ``LIMITED_TRAIN_ROWS``). The result's provenance is read back with
    :func:`provenance`.
    """
    import datasets

    rows, prov = load_glue_rows(task, split, data_dir, limit, use_hub)
    spec = get_task(task)
    features = _features(spec, pooled=spec.name == "mnli" and split == POOLED_SPLIT)
    info = datasets.DatasetInfo(
        description=_PROVENANCE_TAG + json.dumps(prov.to_dict()), features=features
    )
    columns = {name: [row[name] for row in rows] for name in features}
    return content_dataset(columns, prov.sha256, features, info)


def provenance(dataset) -> SplitProvenance:
    """The provenance stamped on a dataset by :func:`load_glue_split`."""
    desc = dataset.info.description or ""
    if not desc.startswith(_PROVENANCE_TAG):
        raise ValueError("this dataset was not loaded by glue_sparse_tasks.load_glue_split")
    return SplitProvenance(**json.loads(desc[len(_PROVENANCE_TAG):]))
