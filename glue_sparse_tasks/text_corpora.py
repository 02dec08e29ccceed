"""Language-modelling text for perplexity: the C4 validation sample/shards and WikiText-2 test.

Sources are tried in order: an explicit file, ``data_dir`` (``<dir>/c4/`` or ``<dir>/wikitext2/``,
also one level up so the GLUE folder works as ``data_dir``), ``$GLUE_SPARSE_DATA_DIR``, then the Hub
(``allenai/c4`` en validation, ``wikitext-2-raw-v1``).
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

from glue_sparse_tasks.data import DATA_DIR_ENV, fingerprint
from glue_sparse_tasks.local_formats import GlueDataError, iter_jsonl_objects, text_lines

C4_FILES = ("validation_sample.jsonl", "validation_sample.jsonl.gz")
C4_SHARD_GLOB = "c4-validation.*.json*"
WIKITEXT_FILE = "test.txt"
_WIKI_TITLE = re.compile(r"^ = [^=].* = $")


@dataclass(frozen=True)
class TextProvenance:
    corpus: str
    source: str
    docs: int
    sha256: str

    def to_dict(self) -> dict:
        return asdict(self)


def _folders(data_dir: str | os.PathLike | None, name: str) -> list[Path]:
    roots = [Path(p).expanduser() for p in (data_dir, os.environ.get(DATA_DIR_ENV)) if p]
    out = []
    for root in roots:
        out += [root / name, root, root.parent / name]
    return out


def iter_jsonl_texts(path: Path, field: str = "text") -> Iterator[str]:
    """Texts of a JSON Lines file (``.gz`` too), streamed: every line must be an object with a string
    ``field``; a bad line, a truncated gzip or a file without documents raises ``GlueDataError`` naming it."""
    seen = False
    for number, obj in iter_jsonl_objects(path):
        if not isinstance(obj.get(field), str):
            raise GlueDataError(f"{path}:{number}: expected an object with a string {field!r} field, "
                                f"got keys {sorted(obj)}")
        seen = True
        yield obj[field]
    if not seen:
        raise GlueDataError(f"{path}: the file holds no documents")


def read_jsonl_texts(path: Path, field: str = "text") -> list[str]:
    """Texts of a JSON Lines file (``.gz`` too), all in memory (see ``iter_jsonl_texts``)."""
    return list(iter_jsonl_texts(path, field))


def local_c4_files(data_dir: str | os.PathLike | None) -> tuple[list[Path], list[str]]:
    """The local C4 validation file(s) (the sample, else ``c4-validation.*`` shards) and the folders looked in."""
    looked: list[str] = []
    for folder in _folders(data_dir, "c4"):
        found = [folder / f for f in C4_FILES if (folder / f).is_file()] or sorted(folder.glob(C4_SHARD_GLOB))
        looked.append(str(folder))
        if found:
            return (found[:1] if found[0].name.startswith("validation_sample") else found), looked
    return [], looked


def load_c4_texts(data_dir: str | None = None, path: str | None = None,
                  use_hub: bool = True) -> tuple[list[str], TextProvenance]:
    """C4 validation documents in stored order, and where they came from."""
    looked: list[str] = []
    if path:
        files = [Path(path).expanduser()]
        if not files[0].is_file():
            raise GlueDataError(f"C4 file {path} does not exist")
    else:
        files, looked = local_c4_files(data_dir)
    if files:
        texts = [t for f in files for t in read_jsonl_texts(f)]
        source = " + ".join(str(f) for f in files)
    elif use_hub:
        import datasets

        shard = "en/c4-validation.00000-of-00008.json.gz"
        try:
            ds = datasets.load_dataset("allenai/c4", data_files={"validation": shard}, split="validation")
        except Exception as exc:  # noqa: BLE001  (any Hub failure means: not available)
            raise GlueDataError(f"C4 validation not found locally (looked in {', '.join(looked) or 'nothing'}) "
                                f"and the Hub failed: {type(exc).__name__}: {str(exc)[:200]}") from None
        texts, source = list(ds["text"]), f"hub:allenai/c4 {shard}"
    else:
        raise GlueDataError(f"C4 validation not found: looked for {', '.join(C4_FILES)} or {C4_SHARD_GLOB} "
                            f"in {', '.join(looked) or '(no data_dir or $' + DATA_DIR_ENV + ')'}")
    return texts, TextProvenance("c4", source, len(texts), fingerprint({"text": t} for t in texts))


def split_wikitext_pages(raw: str) -> list[str]:
    """Split ``wiki.test.raw`` into articles at top-level ``= Title =`` lines (as the document-level set)."""
    pages: list[list[str]] = []
    for line in raw.splitlines(keepends=True):
        if _WIKI_TITLE.match(line.rstrip("\n")) or not pages:
            pages.append([])
        pages[-1].append(line)
    return ["".join(p) for p in pages if "".join(p).strip()]


def load_wikitext2_pages(data_dir: str | None = None, use_hub: bool = True) -> tuple[list[str], TextProvenance]:
    for folder in _folders(data_dir, "wikitext2"):
        path = folder / WIKITEXT_FILE
        if path.is_file():
            raw = "".join(line for _, line in text_lines(path))  # names the file on decode errors
            pages = split_wikitext_pages(raw)
            if not pages:
                raise GlueDataError(f"{path}: the file holds no text")
            return pages, TextProvenance("wikitext2", str(path), len(pages), fingerprint({"text": p} for p in pages))
    if use_hub:
        import datasets

        ds = datasets.load_dataset("EleutherAI/wikitext_document_level", "wikitext-2-raw-v1", split="test")
        pages = list(ds["page"])
        return pages, TextProvenance("wikitext2", "hub:EleutherAI/wikitext_document_level",
                                     len(pages), fingerprint({"text": p} for p in pages))
    raise GlueDataError(f"WikiText-2 test not found: looked for wikitext2/{WIKITEXT_FILE} under "
                        f"{', '.join(str(f) for f in _folders(data_dir, 'wikitext2')) or 'nothing'}")
