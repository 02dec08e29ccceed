"""The bench's results store: one JSON line per cell, rewritten atomically, keyed by content
(``row_key``), read alone or as the parts of one grid."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from glue_sparse.bench.options import BenchConfig, BenchConfigError
from glue_sparse_tasks.atomic import write_text_atomic

STORE_FILE = "results.jsonl"
SUPERSEDED_FILE = "superseded.jsonl"  # rows of an earlier grid or defaults, kept out of the report
SUPERSEDED_DIR = "superseded"


def read_store(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a results store; a malformed line is an error naming its line number."""
    path = Path(path)
    if not path.is_file():
        return []
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise BenchConfigError(f"{path}:{number}: not a JSON object ({exc.msg})") from None
    return rows


def read_stores(paths: list[str | Path]) -> list[dict[str, Any]]:
    """Rows of several stores, e.g. the parts of a grid run in different working stretches (one task
    each); a row found in two of them is an error naming both, so no cell counts twice."""
    rows: list[dict[str, Any]] = []
    seen: dict[str, Path] = {}
    for path in map(Path, paths):
        if not path.is_file():
            raise BenchConfigError(f"{path}: no such results store")
        for row in read_store(path):
            if row["key"] in seen:
                raise BenchConfigError(f"{path}: row {row['key']} ({row['task']} · {row['label']} · seed "
                                       f"{row['seed']}) is also in {seen[row['key']]}")
            seen[row["key"]] = path
            rows.append(row)
    return rows


def write_store(path: str | Path, rows: list[dict[str, Any]]) -> None:
    """Rewrite the whole store atomically: a killed bench never leaves a half-written line."""
    write_text_atomic(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def row_key(identity: dict[str, Any], fingerprints: dict[str, str], bench: BenchConfig, version: str) -> str:
    payload = {"identity": identity, "data": fingerprints, "version": version,
               "eval": {"eval_limit": bench.eval_limit, "latency_docs": bench.latency_docs,
                        "latency_batch_size": bench.latency_batch_size}}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:20]
