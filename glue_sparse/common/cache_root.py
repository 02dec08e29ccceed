"""Where glue-sparse keeps derived data (``$GLUE_SPARSE_CACHE``, default ``~/.cache/glue_sparse``), and the
content hash of a file remembered there by its path, size, modification time and inode: a pre-training start
over a thousand C4 shards names each by its sha256 without reading it again in every process (a changed file
is hashed again)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from glue_sparse_tasks.atomic import write_text_atomic

CACHE_ENV = "GLUE_SPARSE_CACHE"
#: the remembered hashes, one JSON file in the cache root
HASHES_FILE = "file_hashes.json"
_memory: dict[str, list] | None = None  # this process's copy of the file, read once


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "glue_sparse"))


def sha256_of(path: Path) -> str:
    """sha256 of a file's bytes, read now."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _remembered() -> dict[str, list]:
    global _memory
    if _memory is None:
        try:
            _memory = json.loads((cache_root() / HASHES_FILE).read_text())
        except (OSError, ValueError):
            _memory = {}
    return _memory


def file_sha256(path: str | Path, remember: bool = True) -> str:
    """sha256 of a file's bytes, read once per (real path, size, mtime, inode); ``remember`` keeps new ones in
    the cache for other processes (a read-only cache only remembers them in this process)."""
    real = os.path.realpath(path)
    stat = os.stat(real)
    key = [stat.st_size, stat.st_mtime_ns, stat.st_ino]
    known = _remembered().get(real)
    if known and known[:3] == key:
        return known[3]
    digest = sha256_of(Path(real))
    _remembered()[real] = [*key, digest]
    if remember:
        try:
            on_disk = json.loads((cache_root() / HASHES_FILE).read_text()) if (cache_root() / HASHES_FILE).is_file() \
                else {}
        except (OSError, ValueError):
            on_disk = {}
        try:  # merge with what other processes remembered meanwhile
            write_text_atomic(cache_root() / HASHES_FILE, json.dumps({**on_disk, real: [*key, digest]}))
        except OSError:
            pass
    return digest
