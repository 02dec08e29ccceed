"""Atomic file writes: results appear whole or not at all, even if the process is killed mid-write."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from glue_sparse_tasks.errors import UserInputError


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write to a temporary file in the same folder, fsync, rename over ``path``, fsync the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; results are meant to be shared
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        fsync_folder(path.parent)  # the rename itself survives a power cut
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def fsync_folder(folder: str | os.PathLike) -> None:
    """Make a folder's entries (a file created or renamed in it) durable; a no-op where folders cannot be
    opened for it (Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """``json.dumps`` with indentation, written atomically."""
    return write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def check_writable(folder: str | os.PathLike, flag: str = "--output") -> None:
    """Fail now, naming the flag and folder, if ``folder`` (or its nearest existing parent) cannot take
    files: long jobs check this before they load a model, not when they finally write."""

    folder = Path(folder)
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UserInputError(f"{flag} {folder}: {existing} is not a directory")
    try:
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as exc:
        raise UserInputError(f"{flag} {folder}: cannot write in {existing} ({exc.strerror}); choose a writable "
                             "folder") from None
