"""Cache entries that heal: every kind of derived data under ``$GLUE_SPARSE_CACHE`` is a folder
``<kind>/<key>/`` whose ``entry.json`` records, at build, the format version, what made it, and each file's
byte size and sha256. Opening an entry checks it: sizes always; content always where hashing costs little
next to the work the entry saves, or once per entry (the verification recorded against each file's size,
modification time and inode, so a GPU run's start does not re-hash gigabytes of tokens). A damaged or
incomplete entry is rebuilt, with one line saying which and why; one that cannot be rebuilt stops the
command (exit 2) in one line naming the folder and how to clear it.

Writes are durable: files and the entry folder are fsynced before the entry is renamed into place, and the
parent after, so a power cut cannot leave a complete-looking entry with missing data. Two processes that
want the same missing entry may both build it; the first rename wins and the other keeps the winner's copy.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

from glue_sparse.common.cache_root import cache_root, sha256_of
from glue_sparse_tasks.atomic import fsync_folder
from glue_sparse_tasks.errors import UserInputError

MANIFEST = "entry.json"
VERIFIED = "verified.json"
#: how much of an entry is checked each time it is opened: ``content`` (every file's sha256), or ``once``
#: (sha256 the first time, then sizes while the files' size, mtime and inode are those verified)
CHECKS = ("content", "once")
#: the kinds of entry, their folder under the cache, and what each holds (``glue-sparse cache list``)
KINDS = {
    "tokens": "pre-training shards tokenised into memory-mapped token files (glue-sparse pretrain)",
    "teacher_logits": "a distillation teacher's logits on a training set (finetune --distill)",
    "tokenizers": "BPE tokenizers trained on pre-training documents (pretrain --tokenizer bpe:N)",
    "models": "packaged models made loadable: SmolLM2 dequantised from its GGUF, MPNet unpacked from its parts",
}
#: each kind's format version: bump it when what an entry holds changes, and older entries are rebuilt
FORMATS = {"tokens": 2, "teacher_logits": 1, "tokenizers": 1, "models": 1}
_log = logging.getLogger("glue_sparse")


class CacheEntryError(UserInputError):
    """A damaged cache entry that cannot be rebuilt here; names the folder and how to clear it."""


def entry_folder(kind: str, key: str) -> Path:
    return cache_root() / kind / key


def _stat_key(path: Path) -> list[int]:
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns, stat.st_ino]


def damage(folder: Path, fmt: int | None = None, check: str = "content") -> str | None:
    """Why the entry at ``folder`` cannot be used (missing, unfinished, another format, a file missing,
    truncated or altered), or None when it is good. ``fmt`` None: the current format of its kind."""
    fmt = FORMATS.get(folder.parent.name) if fmt is None else fmt
    manifest = folder / MANIFEST
    if not folder.is_dir():
        return "missing"
    if not manifest.is_file():
        return f"no {MANIFEST} (an unfinished or pre-manifest entry)"
    try:
        record = json.loads(manifest.read_text())
        files = record["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"{MANIFEST} is not readable"
    if fmt is not None and record.get("format") != fmt:
        return f"format {record.get('format')} where this version reads {fmt}"
    for name, expected in files.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != expected["bytes"]:
            return f"{name} has {path.stat().st_size:,} bytes where {expected['bytes']:,} were written"
    if check == "once" and _verified(folder, files):
        return None
    for name, expected in files.items():
        if sha256_of(folder / name) != expected["sha256"]:
            return f"{name} does not hold what was written (sha256 differs)"
    if check == "once":
        _record_verified(folder, files)
    return None


def _verified(folder: Path, files: dict) -> bool:
    try:
        seen = json.loads((folder / VERIFIED).read_text())
    except (OSError, ValueError):
        return False
    return all(seen.get(name) == _stat_key(folder / name) for name in files)


def _record_verified(folder: Path, files: dict) -> None:
    try:
        (folder / VERIFIED).write_text(json.dumps({name: _stat_key(folder / name) for name in files}))
    except OSError:
        pass  # a read-only cache: verified again next time


def _finish(staging: Path, kind: str, fmt: int, made_by: str, extra: dict) -> None:
    """Write the manifest of a staged entry and make every byte of it durable."""
    files = {}
    for path in sorted(p for p in staging.rglob("*") if p.is_file()):
        with path.open("rb") as handle:
            os.fsync(handle.fileno())
        files[str(path.relative_to(staging))] = {"bytes": path.stat().st_size, "sha256": sha256_of(path)}
    manifest = {"format": fmt, "kind": kind, "made_by": made_by, "created": time.time(), "files": files, **extra}
    with (staging / MANIFEST).open("w") as handle:
        json.dump(manifest, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    _record_verified(staging, files)  # just hashed: a "once" entry need not be hashed again on its first open
    fsync_folder(staging)


def open_entry(kind: str, key: str, build: Callable[[Path], dict | None], made_by: str,
               check: str = "content") -> Path:
    """The good entry ``<kind>/<key>``: checked as ``check`` says, built by ``build(staging_folder)`` (which
    writes the entry's files and may return extra manifest fields) when missing or damaged."""
    folder, fmt = entry_folder(kind, key), FORMATS[kind]
    problem = damage(folder, fmt, check)
    if problem is None:
        return folder
    if problem != "missing":
        _log.warning(f"cache entry {folder} is damaged ({problem}); building it again")
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-"))
    except OSError as exc:
        raise CacheEntryError(f"cache entry {folder} is {problem} and cannot be built here ({exc.strerror}); "
                              f"make {cache_root()} writable, or clear it: glue-sparse cache clear --kind {kind}"
                              ) from None
    try:
        try:
            extra = build(staging) or {}
        except OSError as exc:
            if problem == "missing":
                raise
            raise CacheEntryError(f"cache entry {folder} is damaged ({problem}) and cannot be built again here "
                                  f"({exc.strerror or exc}: {exc.filename or 'its source'}); clear it: glue-sparse "
                                  f"cache clear --kind {kind}") from None
        _finish(staging, kind, fmt, made_by, extra)
        if problem != "missing" and folder.exists():
            aside = folder.with_name(f".{folder.name}-damaged-{os.getpid()}")
            os.rename(folder, aside)  # out of the way first: a rename never replaces a non-empty folder
            shutil.rmtree(aside, ignore_errors=True)
        try:
            os.rename(staging, folder)
        except OSError:
            if damage(folder, fmt, "content") is not None:  # not another process's good copy: a real failure
                raise
        fsync_folder(folder.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def manifest(folder: Path) -> dict:
    return json.loads((folder / MANIFEST).read_text())


def entries(kind: str | None = None) -> list[tuple[str, Path]]:
    """(kind, folder) of every entry in the cache (finished or not), by kind then name."""
    out = []
    for name in ([kind] if kind else KINDS):
        root = cache_root() / name
        if root.is_dir():
            out += [(name, p) for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    return out
